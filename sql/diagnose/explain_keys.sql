{#-
  The routing process of sql/routing/explain_route.sql traced for many conversation keys in
  one query: the key (origin, service_name, broker_instance, routed_at), and per step its
  code, candidates and result, in the order of the keys and steps. Only the steps that saw
  candidates or decided without any (R2.7, R3.5, R3.6: delayed, dropped) are given: the
  others, tried and empty, say nothing the rules read, and leaving them out of a batch of
  10,000 keys is most of its rows. The switch `keys` says which keys (default 'bound'):
    bound            four lists of equal length, $origin, $service_name, $broker_instance
                     (NULL: none) and $routed_at, one key per position;
    routes           at $routed_at, every route of the instance that has not expired, asked
                     about from its own database (msdb's as a message from outside, R1.2)
                     with its service name ($probe_service for a wildcard: one no route
                     names) and its broker identifier (D-RTE-002's question);
    endpoint_groups  at $routed_at, the far service and broker identifier of the
                     conversation endpoints of each database, neither CLOSED nor in ERROR
                     (select_endpoint_lifetimes.sql's groups; D-RTE-004's question).
  The switch `wildcards` (default 'every key'): 'reached' lists R2.5's wildcard routes only
  for the keys that reach R2.5 (explain_route.sql's reached_wildcards_only), for a rule that
  reads no candidates of a step not reached.
-#}
{%- set keys = keys if keys is defined else 'bound' -%}
{%- if keys == 'bound' -%}
{%- set relation = "(SELECT UNNEST(CAST($origin AS VARCHAR[])) AS origin,
    UNNEST(CAST($service_name AS VARCHAR[])) AS service_name,
    UNNEST(CAST($broker_instance AS VARCHAR[])) AS broker_instance,
    UNNEST(CAST($routed_at AS TIMESTAMP[])) AS routed_at)" -%}
{%- elif keys == 'routes' -%}
{%- set relation = "(SELECT DISTINCT
    CASE WHEN r.database_name = 'msdb' THEN 'outside' ELSE r.database_name END AS origin,
    COALESCE(r.remote_service_name, CAST($probe_service AS VARCHAR)) AS service_name,
    r.broker_instance,
    CAST($routed_at AS TIMESTAMP) AS routed_at
    FROM sys.routes AS r
    WHERE NOT r.is_expired)" -%}
{%- elif keys == 'endpoint_groups' -%}
{%- set relation = "(SELECT DISTINCT
    CASE WHEN e.database_name = 'msdb' THEN 'outside' ELSE e.database_name END AS origin,
    e.far_service AS service_name,
    e.far_broker_instance AS broker_instance,
    CAST($routed_at AS TIMESTAMP) AS routed_at
    FROM sys.conversation_endpoints AS e
    WHERE e.state_desc NOT IN ('CLOSED', 'ERROR'))" -%}
{%- endif %}
SELECT x.origin, x.service_name, x.broker_instance, x.routed_at, x.step, x.candidates,
    x.result
FROM (
{% with conversations = relation, without_weights = true,
    reached_wildcards_only = (wildcards is defined and wildcards == 'reached') -%}
{% include 'routing/explain_route.sql' %}
{%- endwith %}
) AS x
WHERE len(x.candidates) > 0 OR x.result IN ('delayed', 'dropped')
ORDER BY x.origin, x.service_name, x.broker_instance NULLS FIRST, x.routed_at, x.step_order
