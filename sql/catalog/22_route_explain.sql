{#-
  route_explain(origin, service_name [, broker_instance]): the routing process traced, one
  row per matching (R2) and choosing (R3) step, with the candidate routes each step saw.
  An origin that is no database of the instance (nor 'outside') raises, naming the
  databases.
-#}
{% from 'catalog/_known_names.sql' import known_database %}
CREATE OR REPLACE MACRO route_explain(origin, service_name, broker_instance := NULL) AS TABLE
SELECT e.step, e.description, e.candidates, e.result
FROM (
{% set checked_origin = known_database('route_explain', 'origin', 'origin', outside=true) %}
{% with conversations = "(SELECT " ~ checked_origin ~ " AS origin,
    CAST(service_name AS VARCHAR) AS service_name,
    lower(CAST(broker_instance AS VARCHAR)) AS broker_instance,
    CAST(timezone('UTC', current_timestamp) AS TIMESTAMP) AS routed_at)" -%}
{% include 'routing/explain_route.sql' %}
{%- endwith %}
) AS e
