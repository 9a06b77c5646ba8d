-- RECEIVE (C3): the first ready conversation group of the queue, up to $max_messages of its
-- ready messages in queuing order, taken out in one statement. They leave for good when the
-- transaction commits; a rollback puts them back.
DELETE FROM queue_messages
WHERE queuing_order IN (
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
)
RETURNING queuing_order, conversation_handle, conversation_group_id, message_sequence_number,
    message_type_name, message_body, service_name, service_contract_name
