-- OBJECT_ID(name [, type]) of a T-SQL batch: a user table of the database's schema (U), a
-- stored procedure (P) or a queue (SQ) of that name, compared without regard to case as
-- under SQL Server's default collation. pybroker keeps no sys.objects: the number is the
-- table's DuckDB oid, the procedure's object_id, or one more than the queue's row number
-- among its database's queues; it says the object exists, and names it within its kind.
WITH objects AS (
    SELECT 'U' AS type, t.table_oid AS object_id FROM duckdb_tables() AS t
    WHERE t.database_name = current_database() AND t.schema_name = $schema_name
        AND lower(t.table_name) = lower($name) AND $schema_key = 'dbo'
    UNION ALL
    SELECT 'P', p.object_id FROM procedures AS p
    WHERE p.database_id = $database_id AND p.name_key = $schema_key || '.' || lower($name)
    UNION ALL
    SELECT 'SQ', q.number FROM (
        SELECT row_number() OVER (ORDER BY q.name) + 1 AS number, q.name
        FROM service_queues AS q WHERE q.database_id = $database_id) AS q
    WHERE lower(q.name) = lower($name) AND $schema_key = 'dbo'
)
SELECT o.object_id FROM objects AS o
WHERE $type IS NULL OR o.type = upper(trim($type))
ORDER BY o.type DESC
LIMIT 1
