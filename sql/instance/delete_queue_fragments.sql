-- DROP QUEUE: the fragments of the messages in it that are kept as their fragments
-- (queue_messages.body_fragments), before instance/delete_queue_messages.sql.
DELETE FROM message_fragments AS f
WHERE EXISTS (
    SELECT 1 FROM queue_messages AS q
    WHERE q.database_id = $database_id AND q.queue_name = $queue_name
        AND q.body_fragments IS NOT NULL
        AND q.conversation_handle = f.conversation_handle
        AND q.message_sequence_number = f.message_sequence_number
)
