-- CREATE MASTER KEY ENCRYPTION BY PASSWORD (no password is kept).
INSERT INTO database_master_keys (database_id, create_date) VALUES ($database_id, $create_date)
