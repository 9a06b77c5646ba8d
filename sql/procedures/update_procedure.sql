UPDATE procedures SET definition = $definition, modify_date = $now
WHERE database_id = $database_id AND name_key = $name_key
