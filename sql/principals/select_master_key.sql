-- Whether a database has a master key (CREATE MASTER KEY).
SELECT k.create_date FROM database_master_keys AS k WHERE k.database_id = $database_id
