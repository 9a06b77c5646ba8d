{#- `pybroker bench routing`: the batch decision of decide_route.sql, materialized. -#}
CREATE OR REPLACE TEMP TABLE bench_decisions AS
{% include 'routing/decide_route.sql' %}
