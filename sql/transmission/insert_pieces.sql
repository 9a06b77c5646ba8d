-- A run of pieces of a large body SEND put in the transmission queue, in one statement,
-- written on the store's second connection before the SEND's transaction writes its row
-- (migrations/011, pybroker/kernel/messaging/transmission_pieces.py). $piece_numbers and
-- $message_bodies are lists of the same length, piece n's body at place n.
INSERT INTO transmission_queue_pieces (conversation_handle, message_sequence_number,
    piece_number, message_body)
SELECT $conversation_handle, $message_sequence_number, p.piece_number, p.message_body
FROM (
    SELECT unnest($piece_numbers::INTEGER[]) AS piece_number,
        unnest($message_bodies::BLOB[]) AS message_body
) AS p
ORDER BY p.piece_number
