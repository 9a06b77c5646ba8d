{#-
  Every possible route decision of many conversation keys in one query: the rows of
  sql/routing/resolve_route_options.sql (what the engine draws from, R2.3, R3, R4.2) for
  the key (origin, service_name, broker_instance) at $routed_at, with its outcome, address
  and database; the weights are left out (each option is one that some of the key's
  conversations take, which is all diagnose asks). The switch `keys` says which keys (default 'bound'):
    bound    three lists of equal length, $origin, $service_name and $broker_instance
             (NULL: none), one key per position;
    dialogs  the far service and far broker identifier of the dialogs each database began
             and has not seen end (select_dialog_contracts.sql's, D-CFG-011's question),
             routed from that database as Instance.route routes them.
-#}
{%- set keys = keys if keys is defined else 'bound' -%}
{%- if keys == 'bound' -%}
{%- set relation = "(SELECT UNNEST(CAST($origin AS VARCHAR[])) AS origin,
    UNNEST(CAST($service_name AS VARCHAR[])) AS service_name,
    UNNEST(CAST($broker_instance AS VARCHAR[])) AS broker_instance,
    CAST($routed_at AS TIMESTAMP) AS routed_at)" -%}
{%- elif keys == 'dialogs' -%}
{%- set relation = "(SELECT DISTINCT e.database_name AS origin,
    e.far_service AS service_name,
    e.far_broker_instance AS broker_instance,
    CAST($routed_at AS TIMESTAMP) AS routed_at
    FROM sys.conversation_endpoints AS e
    WHERE e.is_initiator AND e.state_desc NOT IN ('CLOSED', 'ERROR'))" -%}
{%- endif %}
{% with conversations = relation, without_weights = true -%}
{% include 'routing/resolve_route_options.sql' %}
{%- endwith %}
