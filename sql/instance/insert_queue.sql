INSERT INTO service_queues (database_id, name, is_receive_enabled, is_enqueue_enabled,
    create_date, is_retention_enabled, is_poison_message_handling_enabled)
VALUES ($database_id, $name, $status, $status, $now, $retention, $poison_message_handling)
