-- CREATE BROKER PRIORITY: ids count up through the instance, as object ids do.
INSERT INTO conversation_priorities (database_id, priority_id, name, name_key,
    service_contract_name, local_service_name, remote_service_name, priority)
SELECT $database_id, COALESCE(MAX(p.priority_id), 0) + 1, $name, $name_key,
    $service_contract_name, $local_service_name, $remote_service_name, $priority
FROM conversation_priorities AS p
