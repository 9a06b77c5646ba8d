-- The contracts each service accepts as a target (sys.service_contract_usages).
SELECT u.database_name, u.service_name, u.service_contract_name
FROM sys.service_contract_usages AS u
ORDER BY u.database_name, u.service_name, u.service_contract_name
