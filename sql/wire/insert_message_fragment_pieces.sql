-- P4.4: one fragment of a message being reassembled, as its pieces (migrations/010), in one
-- statement, durable before the fragment is acknowledged. $piece_numbers and
-- $message_bodies are lists of the same length, piece n's body at place n; the rows go in
-- in piece order, each given its piece_id by the sequence here (migrations/014: the column
-- has no default), so a fragment's piece_ids follow one another as its pieces do and
-- RECEIVE reads a run of them back in one statement (select_message_pieces.sql).
INSERT INTO message_fragments (database_id, conversation_handle, message_sequence_number,
    fragment_number, piece_number, fragment_count, message_size, message_type_name,
    validation, is_end_of_dialog, is_conversation_error, message_body, arrival_time, piece_id)
SELECT $database_id, $conversation_handle, $message_sequence_number, $fragment_number,
    p.piece_number, $fragment_count, $message_size, $message_type_name, $validation,
    $is_end_of_dialog, $is_conversation_error, p.message_body, $arrival_time,
    nextval('message_fragment_piece_ids')
FROM (
    SELECT unnest($piece_numbers::INTEGER[]) AS piece_number,
        unnest($message_bodies::BLOB[]) AS message_body
) AS p
ORDER BY p.piece_number
