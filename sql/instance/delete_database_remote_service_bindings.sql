-- DROP DATABASE: its rows of remote_service_bindings (migrations/023).
DELETE FROM remote_service_bindings WHERE database_id = $database_id
