{#- A partial of receive_messages_where.sql and retain_received_messages_where.sql (C3):
    RECEIVE ... WHERE conversation_handle = $conversation_handle or WHERE
    conversation_group_id = $conversation_group_id (the other parameter is NULL): the
    queuing orders of the first ready conversation group of $queue_name that the condition
    keeps, up to $max_messages of its ready messages that the condition keeps, in queuing
    order. -#}
SELECT m.queuing_order
    FROM queue_messages AS m
    WHERE m.database_id = $database_id AND m.queue_name = $queue_name AND m.status = 1
        AND ($conversation_handle IS NULL OR m.conversation_handle = $conversation_handle)
        AND m.conversation_group_id = (
            SELECT arg_min(f.conversation_group_id, f.queuing_order)
            FROM queue_messages AS f
            WHERE f.database_id = $database_id AND f.queue_name = $queue_name AND f.status = 1
                AND ($conversation_handle IS NULL
                    OR f.conversation_handle = $conversation_handle)
                AND ($conversation_group_id IS NULL
                    OR f.conversation_group_id = $conversation_group_id)
        )
    ORDER BY m.queuing_order
    LIMIT $max_messages
