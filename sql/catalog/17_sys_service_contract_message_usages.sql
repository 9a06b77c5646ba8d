-- sys.service_contract_message_usages: which side of a contract may send which type.
CREATE OR REPLACE VIEW sys.service_contract_message_usages AS
SELECT d.name AS database_name, u.contract_name AS service_contract_name,
    u.message_type_name, u.is_sent_by_initiator, u.is_sent_by_target
FROM main.service_contract_message_usages AS u
JOIN main.databases AS d ON d.database_id = u.database_id
