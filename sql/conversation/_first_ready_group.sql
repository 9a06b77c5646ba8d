{#- A partial of receive_messages.sql and retain_received_messages.sql (C3): the queuing
    orders of the first ready conversation group of $queue_name, up to $max_messages of its
    ready messages in queuing order. -#}
SELECT m.queuing_order
    FROM queue_messages AS m
    WHERE m.database_id = $database_id AND m.queue_name = $queue_name AND m.status = 1
        AND m.conversation_group_id = (
            SELECT arg_min(f.conversation_group_id, f.queuing_order)
            FROM queue_messages AS f
            WHERE f.database_id = $database_id AND f.queue_name = $queue_name AND f.status = 1
        )
    ORDER BY m.queuing_order
    LIMIT $max_messages
