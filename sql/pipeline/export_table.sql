{#-
  `pybroker export`: one table of an instance file in the exported schema of
  pybroker/apps/pipeline/schema.py (the column list and types come from there, never from input).
  GUIDs become lowercase text and times naive UTC TIMESTAMP, the forms that survive
  DuckDB -> Parquet -> Spark; a column the file lacks is exported as NULL of its type.
  source, when given, is read in place of the table (export_transmission_queue.sql).
  DuckDB only: it reads the instance file.
-#}
SELECT
{%- for c in columns %}
    {% if c.name not in present -%}
    CAST(NULL AS {{ c.type }})
    {%- elif c.guid -%}
    lower(CAST(t.{{ c.name }} AS VARCHAR))
    {%- else -%}
    CAST(t.{{ c.name }} AS {{ c.type }})
    {%- endif %} AS {{ c.name }}{{ "," if not loop.last }}
{%- endfor %}
FROM {{ source if source is defined and source else table }} AS t
