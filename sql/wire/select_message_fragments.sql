-- The last fragment arrived: the others, read piece by piece (each statement that picks
-- one fragment scans the message_body of every fragment in the table, so one scan reads
-- them all); wire/delete_message_fragments.sql then removes them.
SELECT f.fragment_number, f.piece_number, f.message_body
FROM message_fragments AS f
WHERE f.conversation_handle = $conversation_handle
    AND f.message_sequence_number = $message_sequence_number
