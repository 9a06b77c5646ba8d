-- GET CONVERSATION GROUP: the conversation group the next RECEIVE from $queue_name would
-- take (the group of its first ready message), or no row when nothing is ready.
SELECT arg_min(m.conversation_group_id, m.queuing_order)
FROM queue_messages AS m
WHERE m.database_id = $database_id AND m.queue_name = $queue_name AND m.status = 1
HAVING COUNT(*) > 0
