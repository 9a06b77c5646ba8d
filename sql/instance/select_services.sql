SELECT s.name, s.queue_name FROM services AS s
WHERE s.database_id = $database_id ORDER BY s.name
