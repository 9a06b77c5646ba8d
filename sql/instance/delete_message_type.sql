DELETE FROM message_types WHERE database_id = $database_id AND name = $name
