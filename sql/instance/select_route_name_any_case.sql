-- A route of this name in the database, compared without regard to case: route names are
-- unique as under SQL Server's default (case-insensitive) collation.
SELECT r.name
FROM routes AS r
WHERE r.database_id = $database_id AND lower(r.name) = lower($name)
