UPDATE message_types SET validation = $validation
WHERE database_id = $database_id AND name = $name
