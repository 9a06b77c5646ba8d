DELETE FROM routes WHERE database_id = $database_id AND name = $name RETURNING name
