-- A remote service binding by name (without regard to case), or the one of a far service.
SELECT b.name, b.remote_service_name FROM remote_service_bindings AS b
WHERE b.database_id = $database_id
    AND (b.name_key = $name_key OR b.remote_service_name = $remote_service_name)
