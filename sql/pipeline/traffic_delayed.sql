{#-
  pipeline traffic: DELAYED conversations (R2.7, R3.5: no route, so their messages wait
  in the transmission queue) and how long they have waited at the time of the export:
  a conversation counts when its route decision is 'delay' or a message of it carries the
  no-route transmission_status (C4). Waits are whole seconds (both engines floor the
  epoch). Inputs: {{ transmission_queue }}, {{ databases }}, {{ decisions }}, {{ as_of }}
  (one row: as_of, NULL for the latest enqueue_time).
-#}
WITH clock AS (
    SELECT COALESCE(
        MAX(a.as_of), (SELECT MAX(q.enqueue_time) FROM {{ transmission_queue }} AS q)
    ) AS as_of
    FROM {{ as_of }} AS a
),
held AS (
    SELECT
        t.conversation_handle,
        MIN(d.name) AS database_name,
        MIN(t.to_service_name) AS service_name,
        COUNT(*) AS messages,
        MIN(t.enqueue_time) AS first_enqueue_time,
        MAX(CASE WHEN t.transmission_status LIKE 'The target service name could not be found%'
            THEN 1 ELSE 0 END) AS has_no_route_status,
        MAX(t.transmission_status) AS transmission_status
    FROM {{ transmission_queue }} AS t
    JOIN {{ databases }} AS d ON d.database_id = t.database_id
    GROUP BY t.conversation_handle
)
SELECT
    h.conversation_handle,
    h.database_name,
    h.service_name,
    r.outcome,
    r.decided_by,
    h.messages,
    h.first_enqueue_time,
    CAST(floor(epoch(c.as_of)) AS BIGINT) - CAST(floor(epoch(h.first_enqueue_time)) AS BIGINT)
        AS waited_seconds,
    h.transmission_status
FROM held AS h
CROSS JOIN clock AS c
LEFT JOIN {{ decisions }} AS r ON r.conversation_id = h.conversation_handle
WHERE r.outcome = 'delay' OR h.has_no_route_status = 1
