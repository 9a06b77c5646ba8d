{#- DuckDBEngine.register_rows: one row of bound values into {{ table }}
    (duckdb__create_rows.sql), one parameter per column of {{ columns }}, in order; DuckDB
    casts each value to its column's type. DuckDB only. -#}
INSERT INTO {{ table }} VALUES (
{%- for c in columns %}${{ loop.index }}{{ ", " if not loop.last }}{% endfor -%}
)
