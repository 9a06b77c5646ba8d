{#-
  resolve_route_options.sql for conversation keys given as bound parameters: three lists of
  equal length ($origin, $service_name, $broker_instance) and one instant ($routed_at).
-#}
{% with conversations = "(SELECT UNNEST(CAST($origin AS VARCHAR[])) AS origin,
    UNNEST(CAST($service_name AS VARCHAR[])) AS service_name,
    UNNEST(CAST($broker_instance AS VARCHAR[])) AS broker_instance,
    CAST($routed_at AS TIMESTAMP) AS routed_at)" -%}
{% include 'routing/resolve_route_options.sql' %}
{%- endwith %}
