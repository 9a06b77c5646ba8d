SELECT q.name, q.is_receive_enabled, q.is_retention_enabled,
    q.is_poison_message_handling_enabled, q.is_activation_enabled, q.activation_procedure,
    q.max_readers, q.activation_execute_as
FROM service_queues AS q
WHERE q.database_id = $database_id ORDER BY q.name
