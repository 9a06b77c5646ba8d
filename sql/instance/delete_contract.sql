DELETE FROM service_contracts WHERE database_id = $database_id AND name = $name
