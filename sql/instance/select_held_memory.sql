-- What DuckDB holds in memory besides the file's own blocks (tag BASE_TABLE, which it can
-- let go of and read again): rows not yet checkpointed, indexes, transactions, results.
-- Store.streaming keeps its lowered memory limit above this.
SELECT coalesce(sum(memory_usage_bytes) FILTER (WHERE tag <> 'BASE_TABLE'), 0)
FROM duckdb_memory()
