{#-
  route_decision(origin, service_name [, broker_instance]): where a conversation goes, now.
  origin is a database name or 'outside'. The arbitrary picks are random per call, as in
  the live engine. An origin that is no database of the instance (nor 'outside') raises,
  naming the databases.
-#}
{% from 'catalog/_known_names.sql' import known_database %}
CREATE OR REPLACE MACRO route_decision(origin, service_name, broker_instance := NULL) AS TABLE
SELECT
    d.outcome,
    d.route_name AS route,
    d.address,
    d.mirror_address,
    d.database_name AS "database",
    d.decision_broker_instance AS broker_instance,
    d.match_step,
    d.choose_step,
    d.locate_step,
    d.decided_by
FROM (
{% set checked_origin = known_database('route_decision', 'origin', 'origin', outside=true) %}
{% with conversations = "(SELECT 1 AS conversation_id, " ~ checked_origin ~ " AS origin,
    CAST(service_name AS VARCHAR) AS service_name,
    lower(CAST(broker_instance AS VARCHAR)) AS broker_instance,
    CAST(timezone('UTC', current_timestamp) AS TIMESTAMP) AS routed_at)", pick = "random" -%}
{% include 'routing/decide_route.sql' %}
{%- endwith %}
) AS d
