{#- The routing process traced for many conversation keys in one query (diagnose's routing
    rules ask about every route and every group of conversations of an instance at once):
    four lists of equal length, $origin, $service_name, $broker_instance (NULL: none) and
    $routed_at (when expiry is judged, R1.4), one key per position. The steps are those of
    sql/routing/, not a second copy of them: one row per key and step, keyed by the four. -#}
{% with conversations = "(SELECT UNNEST(CAST($origin AS VARCHAR[])) AS origin,
    UNNEST(CAST($service_name AS VARCHAR[])) AS service_name,
    UNNEST(CAST($broker_instance AS VARCHAR[])) AS broker_instance,
    UNNEST(CAST($routed_at AS TIMESTAMP[])) AS routed_at)" -%}
{% include 'routing/explain_route.sql' %}
{%- endwith %}
