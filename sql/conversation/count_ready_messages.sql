-- Whether a queue holds a message ready to receive in a conversation group no other
-- transaction holds ($held_groups: comma-joined GUIDs, '' for none; C7), less what open
-- transactions received ($in_flight: comma-joined queuing orders): WAITFOR (RECEIVE)
-- polls this.
SELECT COUNT(*) FROM queue_messages AS m
WHERE m.database_id = $database_id AND m.queue_name = $queue_name AND m.status = 1
    AND m.conversation_group_id NOT IN (SELECT UNNEST(string_split($held_groups, ',')))
    AND m.queuing_order NOT IN (
        SELECT o FROM (SELECT TRY_CAST(UNNEST(string_split($in_flight, ',')) AS BIGINT) AS o)
        WHERE o IS NOT NULL)
