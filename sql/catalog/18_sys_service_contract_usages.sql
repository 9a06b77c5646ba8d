-- sys.service_contract_usages: the contracts each service accepts as a target.
CREATE OR REPLACE VIEW sys.service_contract_usages AS
SELECT d.name AS database_name, u.service_name, u.contract_name AS service_contract_name
FROM main.service_contract_usages AS u
JOIN main.databases AS d ON d.database_id = u.database_id
