-- DROP DATABASE: its rows of database_principals (migrations/023).
DELETE FROM database_principals WHERE database_id = $database_id
