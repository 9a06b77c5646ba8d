-- The queue monitors' periodic check: which watched queues hold a message ready to receive.
SELECT DISTINCT m.database_id, m.queue_name
FROM queue_messages AS m
JOIN service_queues AS q ON q.database_id = m.database_id AND q.name = m.queue_name
WHERE m.status = 1 AND q.is_activation_enabled AND q.activation_procedure IS NOT NULL
    AND q.is_receive_enabled
