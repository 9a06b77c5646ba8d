-- DROP DATABASE: its rows of broker_permissions (migrations/023).
DELETE FROM broker_permissions WHERE database_id = $database_id
