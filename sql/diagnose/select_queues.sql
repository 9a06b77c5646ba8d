-- Queues with their status and activation (diagnose: C3 queues OFF, C8 activation).
SELECT q.database_name, q.name, q.is_receive_enabled, q.is_poison_message_handling_enabled,
    q.is_activation_enabled, q.activation_procedure
FROM sys.service_queues AS q
ORDER BY q.database_name, q.name
