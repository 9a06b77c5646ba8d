-- DROP DATABASE: its routing table, AutoCreatedLocal with it (R1.3).
DELETE FROM routes WHERE database_id = $database_id
