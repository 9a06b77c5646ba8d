{#-
  Macros for numbers both engines compute identically from md5 (lowercase hex on both).
  hash() differs between DuckDB and Spark, DuckDB cannot read hex text as an integer the
  way Spark's conv() does, and random() is not reproducible: so hex digits are read one
  by one. Used by decide_conversations.sql and the generate_*.sql templates.
-#}
{% macro hex_int(digest, first, digits) -%}
(
{%- for i in range(digits) %}{{ " + " if not loop.first }}CAST(strpos('0123456789abcdef', substr({{ digest }}, {{ first + i }}, 1)) - 1 AS BIGINT) * {{ 16 ** (digits - 1 - i) }}{% endfor -%}
)
{%- endmacro %}

{% macro uniform(digest, first) -%}
(CAST({{ hex_int(digest, first, 8) }} AS DOUBLE) / CAST(4294967296 AS DOUBLE))
{%- endmacro %}

{% macro guid(digest) -%}
(substr({{ digest }}, 1, 8) || '-' || substr({{ digest }}, 9, 4) || '-4' || substr({{ digest }}, 14, 3)
    || '-8' || substr({{ digest }}, 18, 3) || '-' || substr({{ digest }}, 21, 12))
{%- endmacro %}

{#- The first 12 hex digits of a digest as a 48-bit integer, with one cast per engine:
    DuckDB reads a '0x' literal, Spark's conv() reads base 16 (DuckDB has no conv(), and
    Spark casts '0x...' to NULL). The same number as hex_int(digest, 1, 12). -#}
{% macro draw48(digest, engine) -%}
{%- if engine == 'spark' -%}
CAST(conv(substr({{ digest }}, 1, 12), 16, 10) AS BIGINT)
{%- elif engine == 'duckdb' -%}
CAST('0x' || substr({{ digest }}, 1, 12) AS BIGINT)
{%- else -%}
{{ raise_unknown_engine(engine) }}
{%- endif -%}
{%- endmacro %}
