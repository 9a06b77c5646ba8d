INSERT INTO services (database_id, name, queue_name, create_date)
VALUES ($database_id, $name, $queue_name, $now)
