-- sys.symmetric_keys: the master key of each database that has one (CREATE MASTER KEY),
-- under SQL Server's name for it.
CREATE OR REPLACE VIEW sys.symmetric_keys AS
SELECT d.name AS database_name, '##MS_DatabaseMasterKey##' AS name, k.create_date
FROM main.database_master_keys AS k
JOIN main.databases AS d ON d.database_id = k.database_id
