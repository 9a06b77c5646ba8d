DELETE FROM service_contract_usages
WHERE database_id = $database_id AND service_name = $service_name
