{#-
  Every possible route decision of many conversation keys in one query: the rows of
  sql/routing/resolve_route_options.sql (what the engine draws from, R2.3, R3, R4.2) for
  the key (origin, service_name, broker_instance) at $routed_at, with its outcome, address
  and database; the weights are left out (each option is one that some of the key's
  conversations take, which is all diagnose asks). The keys are three lists of equal
  length, $origin, $service_name and $broker_instance (NULL: none), one key per position.
  (Binding the few thousand keys a rule has already read costs less than reading them
  again from sys.conversation_endpoints inside this query.)
-#}
{% with conversations = "(SELECT UNNEST(CAST($origin AS VARCHAR[])) AS origin,
    UNNEST(CAST($service_name AS VARCHAR[])) AS service_name,
    UNNEST(CAST($broker_instance AS VARCHAR[])) AS broker_instance,
    CAST($routed_at AS TIMESTAMP) AS routed_at)", without_weights = true -%}
{% include 'routing/resolve_route_options.sql' %}
{%- endwith %}
