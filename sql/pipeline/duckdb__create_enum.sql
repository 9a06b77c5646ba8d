{#- DuckDBEngine.categorical: an ENUM type {{ type_name }} of the distinct values of text
    column {{ column }} of {{ relation }}, in DuckDB's order of the text, so that an ENUM
    sorts and compares as its text does (NULL stays NULL, no value). Names come from the
    engine's code, never from user input. DuckDB only. -#}
CREATE OR REPLACE TYPE "{{ type_name }}" AS ENUM (
    SELECT DISTINCT "{{ column }}"
    FROM {{ relation }}
    WHERE "{{ column }}" IS NOT NULL
    ORDER BY "{{ column }}"
)
