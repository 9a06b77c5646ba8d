DELETE FROM procedures WHERE database_id = $database_id AND name_key = $name_key
