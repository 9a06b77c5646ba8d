-- The messages of one conversation in a queue of this instance, not yet received (C3).
SELECT q.database_name, q.queue_name, q.conversation_handle, q.message_sequence_number,
    q.message_type_name, q.status_desc, q.message_enqueue_time
FROM sys.queue_messages AS q
JOIN sys.conversation_endpoints AS e ON e.conversation_handle = q.conversation_handle
WHERE e.conversation_id = $conversation_id
ORDER BY q.message_enqueue_time, q.message_sequence_number
