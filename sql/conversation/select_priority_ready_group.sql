-- GET CONVERSATION GROUP and RECEIVE from the table in a database that honours broker
-- priorities (HONOR_BROKER_PRIORITY ON): as select_first_ready_group.sql, but the group
-- whose ready messages have the highest priority comes first, then the group of the first
-- ready message among those of that priority. Groups other transactions hold
-- ($held_groups) and what open transactions received ($in_flight) are left out (C7).
SELECT m.conversation_group_id
FROM queue_messages AS m
WHERE m.database_id = $database_id AND m.queue_name = $queue_name AND m.status = 1
    AND m.conversation_group_id NOT IN (SELECT UNNEST(string_split($held_groups, ',')))
    AND m.queuing_order NOT IN (
        SELECT o FROM (SELECT TRY_CAST(UNNEST(string_split($in_flight, ',')) AS BIGINT) AS o)
        WHERE o IS NOT NULL)
GROUP BY m.conversation_group_id
ORDER BY MAX(m.priority) DESC, MIN(m.queuing_order)
LIMIT 1
