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

{#-
  A 64-bit hash of a routing key's text (origin, service name, broker key): the key join
  of decide_conversations.sql compares it, one integer a row, instead of the three texts,
  where decision_keys.sql found no two keys of the conversations sharing one. ``bits``
  below 64 keep only the low bits, so that keys share hashes (tests of the texts' join).
-#}
{% macro key_hash(origin, service_name, broker_key, engine, bits=64) -%}
{%- if engine == 'spark' -%}
{%- set h = 'xxhash64(' ~ origin ~ ', ' ~ service_name ~ ', ' ~ broker_key ~ ')' -%}
{%- elif engine == 'duckdb' -%}
{%- set h = 'hash(' ~ origin ~ ', ' ~ service_name ~ ', ' ~ broker_key ~ ')' -%}
{%- else -%}
{{ raise_unknown_engine(engine) }}
{%- endif -%}
{%- if bits < 64 -%}
({{ h }} & {{ 2 ** bits - 1 }})
{%- else -%}
{{ h }}
{%- endif -%}
{%- endmacro %}
