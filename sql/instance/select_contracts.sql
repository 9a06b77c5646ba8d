SELECT c.name, c.is_system FROM service_contracts AS c
WHERE c.database_id = $database_id ORDER BY c.name
