{#- DuckDBEngine.write: a staged relation as one Parquet file at $path. Parquet's version 2
    encodings (delta-encoded integers and timestamps, byte-stream split) and data page v2:
    at 10M decisions the write took 4.77 s against 5.32 s for DuckDB's default version 1
    (medians of six runs, alternated in one process), and the file is 2 % smaller. Spark
    and pyarrow read them; DuckDB's export for other readers (export.py) keeps version 1.
    Input: {{ relation }} (a name the engine staged, never user input). DuckDB only. -#}
COPY (SELECT * FROM {{ relation }}) TO $path (FORMAT parquet, PARQUET_VERSION v2)
