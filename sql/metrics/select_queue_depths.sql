-- every queue: its ready messages, when the oldest of them was enqueued (NULL: none is
-- ready), and whether it receives and takes messages (C3): /metrics and the console
SELECT d.name AS database_name, q.name AS queue_name, q.is_receive_enabled,
    q.is_enqueue_enabled,
    count(m.queuing_order) FILTER (WHERE m.status = 1) AS ready_messages,
    min(m.message_enqueue_time) FILTER (WHERE m.status = 1) AS oldest_ready
FROM main.service_queues AS q
JOIN main.databases AS d ON d.database_id = q.database_id
LEFT JOIN main.queue_messages AS m
    ON m.database_id = q.database_id AND m.queue_name = q.name
GROUP BY ALL
ORDER BY database_name, queue_name
