SELECT q.name, q.is_receive_enabled FROM service_queues AS q
WHERE q.database_id = $database_id ORDER BY q.name
