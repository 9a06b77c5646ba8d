-- sys.service_contracts: contracts of every database.
CREATE OR REPLACE VIEW sys.service_contracts AS
SELECT d.name AS database_name, c.name, c.is_system, c.create_date
FROM main.service_contracts AS c
JOIN main.databases AS d ON d.database_id = c.database_id
