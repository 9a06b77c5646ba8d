-- One message into the transmission queue with plain bound values: for a large body, which
-- the encoded columns of insert_transmission_queue.sql would copy into base64 text first.
-- $body_pieces: the body is kept as that many pieces instead, $message_body NULL
-- (migrations/011, pybroker/kernel/messaging/transmission_pieces.py).
INSERT INTO transmission_queue (database_id, conversation_handle, message_sequence_number,
    fragment_number, fragment_count, message_size, to_service_name, to_broker_instance,
    from_service_name, service_contract_name, message_type_name, validation,
    is_end_of_dialog, is_conversation_error, priority, enqueue_time, message_body,
    transmission_status, is_inbound, body_pieces)
VALUES ($database_id, $conversation_handle, $message_sequence_number, 0, 1, $message_size,
    $to_service_name, $to_broker_instance, $from_service_name, $service_contract_name,
    $message_type_name, $validation, $is_end_of_dialog, $is_conversation_error, $priority,
    $enqueue_time, $message_body, $transmission_status, $is_inbound, $body_pieces)
