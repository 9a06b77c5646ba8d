-- The stored procedures of every database (diagnose: C8, an activation procedure that does
-- not exist).
SELECT p.database_name, p.schema_name, p.name
FROM sys.procedures AS p
ORDER BY p.database_name, p.schema_name, p.name
