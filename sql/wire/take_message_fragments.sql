-- The last fragment arrived: the others leave message_fragments to make the message whole.
DELETE FROM message_fragments
WHERE conversation_handle = $conversation_handle
    AND message_sequence_number = $message_sequence_number
RETURNING fragment_number, message_body
