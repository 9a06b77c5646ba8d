SELECT u.contract_name, u.message_type_name, u.is_sent_by_initiator, u.is_sent_by_target
FROM service_contract_message_usages AS u
WHERE u.database_id = $database_id
ORDER BY u.contract_name, u.message_type_name
