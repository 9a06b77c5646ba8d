{#- DuckDBEngine.categorical: the rows of {{ relation }}, each column of {{ categories }}
    (pairs of a column and its ENUM type, of duckdb__create_enum.sql) cast to its type, so
    that a join carries, and the Parquet writer writes, a small integer per row instead of
    the text: DuckDB writes an ENUM as a text column whose dictionary is the type's values,
    without hashing each row's text. Values, their order and the Parquet schema written
    are the text's. Names come from the engine's code, never from user input. DuckDB only.
-#}
SELECT *
{%- if categories %} REPLACE (
{%- for column, type_name in categories %}
    CAST("{{ column }}" AS "{{ type_name }}") AS "{{ column }}"{{ "," if not loop.last }}
{%- endfor %}
)
{%- endif %}
FROM {{ relation }}
