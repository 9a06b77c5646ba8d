{#-
  pipeline resolve, stage 2: each conversation with its routing key: broker identifiers in
  lower case (as the live engine normalizes them) and routed_at = the start of the epoch
  its begin_time falls in (route_epochs.sql), for its routing database (R1.1: the origin's;
  R1.2: msdb for 'outside') and service. Three parts, each a plain join (an outer join
  with range conditions becomes a nested-loop join in DuckDB): services with expiring
  routes of their own, all other services, and conversations that cannot be routed
  (origin not a database of the instance, or no begin_time: routed_at NULL, no decision).
  Inputs: {{ conversations }}, {{ epochs }} (small), {{ databases }}.
-#}
WITH routed AS (
    SELECT c.*, d.database_id AS routing_database_id
    FROM {{ conversations }} AS c
    JOIN {{ databases }} AS d
        ON d.name = CASE WHEN c.origin = 'outside' THEN 'msdb' ELSE c.origin END
    WHERE c.begin_time IS NOT NULL
),
own_expiry AS (
    SELECT DISTINCT e.database_id, e.service_name
    FROM {{ epochs }} AS e
    WHERE e.service_name IS NOT NULL
)
SELECT
    c.conversation_id, c.origin, c.service_name,
    lower(c.broker_instance) AS broker_instance,
    e.routed_at
FROM routed AS c
JOIN {{ epochs }} AS e
    ON e.database_id = c.routing_database_id AND e.service_name = c.service_name
WHERE c.begin_time >= e.routed_at AND (e.epoch_end IS NULL OR c.begin_time < e.epoch_end)
UNION ALL
SELECT
    c.conversation_id, c.origin, c.service_name,
    lower(c.broker_instance) AS broker_instance,
    e.routed_at
FROM routed AS c
LEFT JOIN own_expiry AS o
    ON o.database_id = c.routing_database_id AND o.service_name = c.service_name
JOIN {{ epochs }} AS e
    ON e.database_id = c.routing_database_id AND e.service_name IS NULL
WHERE o.database_id IS NULL
    AND c.begin_time >= e.routed_at AND (e.epoch_end IS NULL OR c.begin_time < e.epoch_end)
UNION ALL
SELECT
    c.conversation_id, c.origin, c.service_name,
    lower(c.broker_instance) AS broker_instance,
    CAST(NULL AS TIMESTAMP) AS routed_at
FROM {{ conversations }} AS c
LEFT JOIN {{ databases }} AS d
    ON d.name = CASE WHEN c.origin = 'outside' THEN 'msdb' ELSE c.origin END
WHERE d.database_id IS NULL OR c.begin_time IS NULL
