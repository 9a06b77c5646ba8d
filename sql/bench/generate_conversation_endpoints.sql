{#-
  `pybroker bench diagnose`: $endpoint_count conversation endpoints in database
  $database_id, between $service and the services svc_000000.. of `bench routing`'s routes
  ($route_count of them), created over the two hours before $now. Endpoint k is, by k mod 10:
    0-3  an initiator CONVERSING
    4-6  a target DISCONNECTED_INBOUND (its initiator ended first: the fire-and-forget leak)
    7-9  an initiator CLOSED
-#}
INSERT INTO conversation_endpoints
SELECT
    printf('%08x-0000-4000-8000-%012x', $database_id, g.k) AS conversation_handle,
    $database_id,
    printf('%08x-0000-4000-9000-%012x', $database_id, g.k) AS conversation_id,
    printf('%08x-0000-4000-a000-%012x', $database_id, g.k) AS conversation_group_id,
    g.k % 10 NOT IN (4, 5, 6) AS is_initiator,
    $service AS service_name,
    'DEFAULT' AS service_contract_name,
    printf('svc_%06d', g.k % CAST($route_count AS BIGINT)) AS far_service,
    NULL AS far_broker_instance,
    NULL AS requested_broker_instance,
    CASE WHEN g.k % 10 < 4 THEN 'CO' WHEN g.k % 10 < 7 THEN 'DI' ELSE 'CD' END AS state,
    CAST($now AS TIMESTAMP) + INTERVAL 68 YEAR AS lifetime,
    NULL AS dialog_timer,
    1 AS send_sequence,
    CASE WHEN g.k % 10 < 4 THEN 0 ELSE 1 END AS first_unacked_send_sequence,
    NULL AS end_dialog_sequence,
    CASE WHEN g.k % 10 < 4 THEN 0 ELSE 2 END AS receive_sequence,
    0 AS receive_sequence_frag,
    0 AS transmission_retry_count,
    NULL AS transmission_next_attempt,
    NULL AS error_code,
    NULL AS error_description,
    5 AS priority,
    CAST($now AS TIMESTAMP) - to_seconds(CAST(g.k % 7200 AS DOUBLE)) AS create_date
FROM (SELECT r.range AS k FROM range(CAST($endpoint_count AS BIGINT)) AS r) AS g
