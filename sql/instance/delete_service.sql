DELETE FROM services WHERE database_id = $database_id AND name = $name
