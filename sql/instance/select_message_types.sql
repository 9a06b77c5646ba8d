SELECT t.name, t.validation, t.is_system FROM message_types AS t
WHERE t.database_id = $database_id ORDER BY t.name
