INSERT INTO service_contract_usages (database_id, service_name, contract_name)
VALUES ($database_id, $service_name, $contract_name)
