-- P4.4: one piece of one fragment of a message being reassembled, durable before the
-- fragment is acknowledged (a fragment is kept as pieces under DuckDB's block size,
-- migrations/010).
INSERT INTO message_fragments (database_id, conversation_handle, message_sequence_number,
    fragment_number, piece_number, fragment_count, message_size, message_type_name,
    validation, is_end_of_dialog, is_conversation_error, message_body, arrival_time)
VALUES ($database_id, $conversation_handle, $message_sequence_number, $fragment_number,
    $piece_number, $fragment_count, $message_size, $message_type_name, $validation,
    $is_end_of_dialog, $is_conversation_error, $message_body, $arrival_time)
