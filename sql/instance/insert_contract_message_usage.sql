INSERT INTO service_contract_message_usages
    (database_id, contract_name, message_type_name, is_sent_by_initiator, is_sent_by_target)
VALUES ($database_id, $contract_name, $message_type_name, $is_sent_by_initiator,
    $is_sent_by_target)
