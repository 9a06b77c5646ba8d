-- One piece of a large body SEND put in the transmission queue, written on the store's
-- second connection before the SEND's transaction writes its row (migrations/011,
-- pybroker/conversation/transmission_pieces.py).
INSERT INTO transmission_queue_pieces (conversation_handle, message_sequence_number,
    piece_number, message_body)
VALUES ($conversation_handle, $message_sequence_number, $piece_number, $message_body)
