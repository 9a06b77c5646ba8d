-- What the endpoints in $conversation_handle (comma-joined) still have to send, in order.
SELECT t.conversation_handle, t.message_sequence_number, t.message_type_name, t.validation,
    t.message_body, t.is_end_of_dialog, t.is_conversation_error
FROM transmission_queue AS t
WHERE NOT t.is_inbound AND t.conversation_handle IN (SELECT UNNEST(string_split($conversation_handle, ',')))
ORDER BY t.conversation_handle, t.message_sequence_number, t.fragment_number
