-- What the endpoints in $conversation_handle (comma-joined) still have to send, in order.
-- body_pieces: the body is kept as that many pieces of message_size bytes in all
-- (migrations/011, pybroker/kernel/messaging/transmission_pieces.py).
SELECT t.conversation_handle, t.message_sequence_number, t.message_type_name, t.validation,
    t.message_body, t.is_end_of_dialog, t.is_conversation_error, t.body_pieces,
    t.message_size
FROM transmission_queue AS t
WHERE NOT t.is_inbound AND t.conversation_handle IN (SELECT UNNEST(string_split($conversation_handle, ',')))
ORDER BY t.conversation_handle, t.message_sequence_number, t.fragment_number
