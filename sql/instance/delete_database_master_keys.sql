-- DROP DATABASE: its rows of database_master_keys (migrations/023).
DELETE FROM database_master_keys WHERE database_id = $database_id
