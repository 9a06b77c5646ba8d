-- The last fragment arrived: the others are read back one at a time, so that no more than
-- one fragment is outside the table at once (a large message's fragments together are as
-- large as the message; wire/delete_message_fragments.sql then removes them).
SELECT f.message_body
FROM message_fragments AS f
WHERE f.conversation_handle = $conversation_handle
    AND f.message_sequence_number = $message_sequence_number
    AND f.fragment_number = $fragment_number
