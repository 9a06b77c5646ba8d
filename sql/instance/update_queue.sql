-- ALTER QUEUE: STATUS sets both receive and enqueue, as in SQL Server (C3).
UPDATE service_queues
SET is_receive_enabled = $status, is_enqueue_enabled = $status,
    is_retention_enabled = $retention,
    is_poison_message_handling_enabled = $poison_message_handling
WHERE database_id = $database_id AND name = $name
