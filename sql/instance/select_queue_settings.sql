SELECT q.name, q.is_receive_enabled, q.is_retention_enabled,
    q.is_poison_message_handling_enabled
FROM service_queues AS q
WHERE q.database_id = $database_id ORDER BY q.name
