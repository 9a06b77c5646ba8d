SELECT u.service_name, u.contract_name FROM service_contract_usages AS u
WHERE u.database_id = $database_id ORDER BY u.service_name, u.contract_name
