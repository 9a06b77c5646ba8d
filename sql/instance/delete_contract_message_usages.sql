DELETE FROM service_contract_message_usages
WHERE database_id = $database_id AND contract_name = $contract_name
