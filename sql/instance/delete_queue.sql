DELETE FROM service_queues WHERE database_id = $database_id AND name = $name
