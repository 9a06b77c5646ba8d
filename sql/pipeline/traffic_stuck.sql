{#-
  pipeline traffic: messages that have not left, per service, route and transmission_status
  text (C4), with the oldest and how long it has waited (whole seconds).
  Inputs: {{ transmission_queue }}, {{ databases }}, {{ decisions }}, {{ as_of }}.
-#}
WITH clock AS (
    SELECT COALESCE(
        MAX(a.as_of), (SELECT MAX(q.enqueue_time) FROM {{ transmission_queue }} AS q)
    ) AS as_of
    FROM {{ as_of }} AS a
)
SELECT
    d.name AS database_name,
    t.to_service_name AS service_name,
    r.route,
    t.transmission_status,
    COUNT(*) AS messages,
    COUNT(DISTINCT t.conversation_handle) AS conversations,
    MIN(t.enqueue_time) AS oldest_enqueue_time,
    MAX(CAST(floor(epoch(c.as_of)) AS BIGINT) - CAST(floor(epoch(t.enqueue_time)) AS BIGINT))
        AS max_waited_seconds
FROM {{ transmission_queue }} AS t
JOIN {{ databases }} AS d ON d.database_id = t.database_id
CROSS JOIN clock AS c
LEFT JOIN {{ decisions }} AS r ON r.conversation_id = t.conversation_handle
WHERE COALESCE(t.transmission_status, '') <> ''
GROUP BY d.name, t.to_service_name, r.route, t.transmission_status
