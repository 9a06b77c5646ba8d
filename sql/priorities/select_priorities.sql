-- The broker priorities of a database, in the order they were created.
SELECT p.name, p.service_contract_name, p.local_service_name, p.remote_service_name,
    p.priority
FROM conversation_priorities AS p
WHERE p.database_id = $database_id
ORDER BY p.priority_id
