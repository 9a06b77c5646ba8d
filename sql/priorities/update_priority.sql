-- ALTER BROKER PRIORITY: every option written back (the service has merged the changes).
UPDATE conversation_priorities SET
    service_contract_name = $service_contract_name, local_service_name = $local_service_name,
    remote_service_name = $remote_service_name, priority = $priority
WHERE database_id = $database_id AND name_key = $name_key
