-- RECEIVE ... WHERE in a transaction that has changed nothing (C7): the ready messages of
-- one conversation group ($conversation_group_id, which the transaction holds) of
-- $queue_name, of one conversation only when $conversation_handle is not NULL, up to
-- $max_messages in queuing order, less what open transactions received ($in_flight:
-- comma-joined queuing orders, '' for none). Nothing changes here: they leave at commit
-- (delete_received_messages.sql). The columns of receive_messages_where.sql's RETURNING.
SELECT m.queuing_order, m.conversation_handle, m.conversation_group_id,
    m.message_sequence_number, m.message_type_name, m.message_body, m.service_name,
    m.service_contract_name, m.body_fragments
FROM queue_messages AS m
WHERE m.database_id = $database_id AND m.queue_name = $queue_name AND m.status = 1
    AND m.conversation_group_id = $conversation_group_id
    AND ($conversation_handle IS NULL OR m.conversation_handle = $conversation_handle)
    AND m.queuing_order NOT IN (
        SELECT o FROM (SELECT TRY_CAST(UNNEST(string_split($in_flight, ',')) AS BIGINT) AS o)
        WHERE o IS NOT NULL)
ORDER BY m.queuing_order
LIMIT $max_messages
