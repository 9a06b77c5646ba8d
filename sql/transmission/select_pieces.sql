-- Pieces $first_piece up to $end_piece (excluded) of a message of the transmission queue
-- kept as pieces, in order (pybroker/kernel/messaging/transmission_pieces.py reads a body
-- back a few MiB per statement).
SELECT p.piece_number, p.message_body
FROM transmission_queue_pieces AS p
WHERE p.conversation_handle = $conversation_handle
    AND p.message_sequence_number = $message_sequence_number
    AND p.piece_number >= $first_piece AND p.piece_number < $end_piece
ORDER BY p.piece_number
