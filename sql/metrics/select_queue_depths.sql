-- /metrics: every queue's ready messages and when the oldest of them was enqueued (NULL:
-- none is ready)
SELECT d.name AS database_name, q.name AS queue_name,
    count(m.queuing_order) FILTER (WHERE m.status = 1) AS ready,
    min(m.message_enqueue_time) FILTER (WHERE m.status = 1) AS oldest_ready
FROM main.service_queues AS q
JOIN main.databases AS d ON d.database_id = q.database_id
LEFT JOIN main.queue_messages AS m
    ON m.database_id = q.database_id AND m.queue_name = q.name
GROUP BY d.name, q.name
ORDER BY d.name, q.name
