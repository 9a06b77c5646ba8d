-- the console's overview: each database of the instance
SELECT name AS database_name, service_broker_guid, is_broker_enabled
FROM sys.databases
ORDER BY database_name
