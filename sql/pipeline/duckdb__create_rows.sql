{#- DuckDBEngine.register_rows: an empty table {{ table }} of the given {{ columns }} (of
    pybroker/apps/pipeline/schema.py), which duckdb__insert_rows.sql fills with bound values.
    Names and types come from the engine's code, never from user input. DuckDB only: Spark
    builds the relation with createDataFrame. -#}
CREATE OR REPLACE TABLE {{ table }} (
{%- for c in columns %}
    "{{ c.name }}" {{ c.type }}{{ "," if not loop.last }}
{%- endfor %}
)
