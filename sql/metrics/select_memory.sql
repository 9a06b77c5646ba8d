-- /metrics: the memory DuckDB holds for the instance file now, in bytes
SELECT coalesce(sum(memory_usage_bytes), 0) FROM duckdb_memory()
