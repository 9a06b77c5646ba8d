-- DuckDB's name of the instance file's catalog: the user tables of T-SQL batches are named
-- in it in full (catalog.schema.table), never ambiguous with a schema of the same name.
SELECT current_database()
