-- One endpoint by handle, with why its waiting messages have not left (C4), if any.
SELECT e.conversation_handle, e.database_id, e.conversation_id, e.conversation_group_id,
    e.is_initiator, e.service_name, e.service_contract_name, e.far_service,
    e.far_broker_instance, e.requested_broker_instance, e.state, e.lifetime, e.dialog_timer,
    e.send_sequence, e.first_unacked_send_sequence, e.end_dialog_sequence, e.receive_sequence,
    e.receive_sequence_frag, e.transmission_retry_count, e.transmission_next_attempt,
    e.error_code, e.error_description, e.priority, e.create_date,
    (SELECT any_value(t.transmission_status) FROM transmission_queue AS t
     WHERE t.conversation_handle = e.conversation_handle) AS transmission_status
FROM conversation_endpoints AS e
WHERE e.conversation_handle = $conversation_handle
