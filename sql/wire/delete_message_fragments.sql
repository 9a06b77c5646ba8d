-- A message made whole: its fragments leave message_fragments (read by
-- wire/select_message_fragments.sql).
DELETE FROM message_fragments
WHERE conversation_handle = $conversation_handle
    AND message_sequence_number = $message_sequence_number
