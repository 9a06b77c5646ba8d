-- GET CONVERSATION GROUP, and RECEIVE from the table (C7): the conversation group the next
-- RECEIVE from $queue_name takes (the group of its first ready message), skipping the
-- groups other transactions hold ($held_groups: comma-joined GUIDs, '' for none) and what
-- open transactions received ($in_flight: comma-joined queuing orders), or no row when
-- no other group has a ready message.
SELECT arg_min(m.conversation_group_id, m.queuing_order)
FROM queue_messages AS m
WHERE m.database_id = $database_id AND m.queue_name = $queue_name AND m.status = 1
    AND m.conversation_group_id NOT IN (SELECT UNNEST(string_split($held_groups, ',')))
    AND m.queuing_order NOT IN (
        SELECT o FROM (SELECT TRY_CAST(UNNEST(string_split($in_flight, ',')) AS BIGINT) AS o)
        WHERE o IS NOT NULL)
HAVING COUNT(*) > 0
