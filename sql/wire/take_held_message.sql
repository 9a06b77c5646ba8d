-- A whole message held with status 2 (it arrived out of order) is next in sequence now.
DELETE FROM queue_messages
WHERE conversation_handle = $conversation_handle
    AND message_sequence_number = $message_sequence_number AND status = 2
RETURNING validation, message_body
