{#-
  `pybroker export`: export_info.parquet (pybroker/apps/pipeline/schema.py EXPORT_INFO), one row
  of when the state was taken ($exported_at, naive UTC) and the file's schema version
  ($schema_version), written by DuckDB's own Parquet writer to $path. DuckDB only.
-#}
COPY (
    SELECT
        CAST($exported_at AS TIMESTAMP) AS exported_at,
        CAST($schema_version AS INTEGER) AS schema_version
) TO $path (FORMAT parquet)
