-- The services one instance hosts, with their queues (diagnose: who hosts what).
SELECT s.database_name, s.name, s.queue_name
FROM sys.services AS s
ORDER BY s.database_name, s.name
