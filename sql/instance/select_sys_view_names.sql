-- The views of the sys schema (sys.routes, ...), by name: what a misspelt one is matched
-- against when a query names it (storage_errors.query_failed).
SELECT v.view_name FROM duckdb_views() AS v WHERE v.schema_name = 'sys'
