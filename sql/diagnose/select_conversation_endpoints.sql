-- The endpoints of one conversation held by this instance (C1), with the sequence numbers
-- trace compares: what each side sent (send_sequence), had acknowledged
-- (first_unacked_send_sequence) and took in (receive_sequence).
SELECT e.database_name, e.conversation_handle, e.conversation_id, e.is_initiator,
    e.service_name, e.service_contract_name, e.far_service, e.far_broker_instance,
    e.state_desc, e.send_sequence, e.first_unacked_send_sequence, e.end_dialog_sequence,
    e.receive_sequence, e.error_code, e.error_description, e.transmission_retry_count,
    e.transmission_next_attempt, e.lifetime, e.create_date
FROM sys.conversation_endpoints AS e
WHERE e.conversation_id = $conversation_id
ORDER BY e.is_initiator DESC, e.database_name
