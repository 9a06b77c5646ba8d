"""Serving an instance to clients that are not the process holding its file: snapshots for
DuckDB's own tools and the PostgreSQL wire protocol for analysts (read-only)."""
