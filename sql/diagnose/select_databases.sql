-- The databases of one instance with their broker identifiers (diagnose: who is where).
SELECT d.name, d.service_broker_guid AS broker_instance
FROM sys.databases AS d
ORDER BY d.name
