{#-
  pipeline traffic: message volume per database, service and route per hour of
  enqueue_time: messages, conversations, body bytes, and how many of them are held with a
  transmission_status (C4: blank while nothing has gone wrong).
  Inputs: {{ transmission_queue }}, {{ databases }}, {{ decisions }} (resolve's, keyed by
  conversation handle).
-#}
SELECT
    d.name AS database_name,
    t.to_service_name AS service_name,
    r.route,
    r.outcome,
    date_trunc('hour', t.enqueue_time) AS hour,
    COUNT(*) AS messages,
    COUNT(DISTINCT t.conversation_handle) AS conversations,
    SUM(COALESCE(octet_length(t.message_body), 0)) AS body_bytes,
    SUM(CASE WHEN COALESCE(t.transmission_status, '') <> '' THEN 1 ELSE 0 END)
        AS messages_held
FROM {{ transmission_queue }} AS t
JOIN {{ databases }} AS d ON d.database_id = t.database_id
LEFT JOIN {{ decisions }} AS r ON r.conversation_id = t.conversation_handle
GROUP BY d.name, t.to_service_name, r.route, r.outcome, date_trunc('hour', t.enqueue_time)
