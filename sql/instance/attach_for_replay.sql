-- An instance file attached to an in-memory database, so that DuckDB replays its
-- write-ahead log with a default database set (pybroker/storage/recovery.py). ATTACH takes
-- no bound parameter: the path is a string literal made by the `literal` filter.
ATTACH {{ path | literal }} AS {{ alias }}
