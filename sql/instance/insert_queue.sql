INSERT INTO service_queues (database_id, name, is_receive_enabled, is_enqueue_enabled, create_date)
VALUES ($database_id, $name, $status, TRUE, $now)
