-- Whether a queue holds a message ready to receive of one conversation or one group (the
-- other parameter is NULL): WAITFOR (RECEIVE ... WHERE ...) polls this.
SELECT COUNT(*) FROM queue_messages AS m
WHERE m.database_id = $database_id AND m.queue_name = $queue_name AND m.status = 1
    AND ($conversation_handle IS NULL OR m.conversation_handle = $conversation_handle)
    AND ($conversation_group_id IS NULL OR m.conversation_group_id = $conversation_group_id)
