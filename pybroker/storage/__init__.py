"""Storage: the DuckDB store, its schema and recovery, the SQL templates, snapshots."""
