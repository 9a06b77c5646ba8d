-- The pieces of one message of the transmission queue (migrations/011): before they are
-- written again (what a crash or a rollback left), or after the SEND that wrote them
-- rolled back.
DELETE FROM transmission_queue_pieces
WHERE conversation_handle = $conversation_handle
    AND message_sequence_number = $message_sequence_number
