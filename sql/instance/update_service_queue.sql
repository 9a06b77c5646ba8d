UPDATE services SET queue_name = $queue_name WHERE database_id = $database_id AND name = $name
