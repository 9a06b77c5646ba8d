-- P4.4: one fragment of a message being reassembled, durable before it is acknowledged.
INSERT INTO message_fragments (database_id, conversation_handle, message_sequence_number,
    fragment_number, fragment_count, message_size, message_type_name, validation,
    is_end_of_dialog, is_conversation_error, message_body, arrival_time)
VALUES ($database_id, $conversation_handle, $message_sequence_number, $fragment_number,
    $fragment_count, $message_size, $message_type_name, $validation, $is_end_of_dialog,
    $is_conversation_error, $message_body, $arrival_time)
