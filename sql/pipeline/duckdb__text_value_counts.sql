{#- DuckDBEngine.categorical: how many distinct values each of {{ columns }} (text columns of
    {{ relation }}) holds, in one row, one column each under its own name; NULL for a column
    with a value holding the character U+0000, which DuckDB 1.5.6 cannot keep in an ENUM (a
    query sorting by such a column fails with the parser error "unterminated quoted
    string"). Names come from the engine's code, never from user input. DuckDB only. -#}
SELECT
{%- for column in columns %}
    CASE WHEN BOOL_OR(contains("{{ column }}", chr(0))) THEN NULL
        ELSE COUNT(DISTINCT "{{ column }}") END AS "{{ column }}"{{ "," if not loop.last }}
{%- endfor %}
FROM {{ relation }}
