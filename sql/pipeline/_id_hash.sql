{#-
  A 64-bit hash of a conversation_id, for checks that group 10M ids (8 bytes a row
  instead of the text). The hash differs between the engines (DuckDB's hash(), Spark's
  xxhash64()); each compares only with itself. Used by conversation_id_counts.sql and
  duplicate_conversations.sql.
-#}
{% macro id_hash(column, engine) -%}
{%- if engine == 'spark' -%}
xxhash64({{ column }})
{%- elif engine == 'duckdb' -%}
hash({{ column }})
{%- else -%}
{{ raise_unknown_engine(engine) }}
{%- endif -%}
{%- endmacro %}
