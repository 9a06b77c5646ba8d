{#- explain_route.sql for one conversation key given as bound parameters. -#}
{% with conversations = "(SELECT CAST($origin AS VARCHAR) AS origin,
    CAST($service_name AS VARCHAR) AS service_name,
    CAST($broker_instance AS VARCHAR) AS broker_instance,
    CAST($routed_at AS TIMESTAMP) AS routed_at)" -%}
{% include 'routing/explain_route.sql' %}
{%- endwith %}
