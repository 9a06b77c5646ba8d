{#-
  Jinja macros of the catalog's table macros (imported, never run on their own: the
  storage skips catalog files named _*). Each is an expression of the argument itself that
  raises through DuckDB's error() when the argument names nothing of the instance, so a
  misspelt name fails the query, saying which names exist, where it would give no row
  (as the command line and the API refuse it). The argument is a macro parameter, never
  text of a user; macro_name is the calling macro's name.
-#}
{% macro known_database(macro_name, argument, what, outside=false) -%}
CASE
    WHEN CAST({{ argument }} AS VARCHAR) IN (SELECT k.name FROM sys.databases AS k)
    {%- if outside %} OR CAST({{ argument }} AS VARCHAR) = 'outside'{% endif %}
        THEN CAST({{ argument }} AS VARCHAR)
    ELSE error(format(
        '{{ macro_name }}(): {{ what }} {} is {{ "neither a database of this instance nor ''outside''" if outside else "no database of this instance" }}; the databases are {}',
        COALESCE('''' || CAST({{ argument }} AS VARCHAR) || '''', 'NULL'),
        (SELECT string_agg(k.name, ', ' ORDER BY k.name) FROM sys.databases AS k)))
END
{%- endmacro %}

{% macro known_queue(macro_name, of_database, argument) -%}
CASE
    WHEN CAST({{ argument }} AS VARCHAR) IN (
        SELECT q.name FROM sys.service_queues AS q WHERE q.database_name = {{ of_database }})
        THEN CAST({{ argument }} AS VARCHAR)
    ELSE error(format(
        '{{ macro_name }}(): database {} has no queue {}; its queues are {}',
        '''' || CAST({{ of_database }} AS VARCHAR) || '''',
        COALESCE('''' || CAST({{ argument }} AS VARCHAR) || '''', 'NULL'),
        COALESCE((SELECT string_agg(q.name, ', ' ORDER BY q.name) FROM sys.service_queues AS q
            WHERE q.database_name = {{ of_database }}), '(none)')))
END
{%- endmacro %}
