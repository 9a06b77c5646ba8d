-- One broker priority of a database, by name (without regard to case).
SELECT p.name, p.service_contract_name, p.local_service_name, p.remote_service_name,
    p.priority
FROM conversation_priorities AS p
WHERE p.database_id = $database_id AND p.name_key = $name_key
