-- GET CONVERSATION GROUP, and RECEIVE from the table (C7): the conversation group the next
-- RECEIVE from $queue_name takes, skipping the groups other transactions hold
-- ($held_groups: comma-joined GUIDs, '' for none) and what open transactions received
-- ($in_flight: comma-joined queuing orders), or no row when no other group has a ready
-- message. The group of the first ready message; with by_priority (a database that honours
-- broker priorities, HONOR_BROKER_PRIORITY ON) the group whose ready messages have the
-- highest priority, then the first among those.
SELECT {% if by_priority %}m.conversation_group_id{% else %}arg_min(m.conversation_group_id, m.queuing_order){% endif %}
FROM queue_messages AS m
WHERE m.database_id = $database_id AND m.queue_name = $queue_name AND m.status = 1
    AND m.conversation_group_id NOT IN (SELECT UNNEST(string_split($held_groups, ',')))
    AND m.queuing_order NOT IN (
        SELECT o FROM (SELECT TRY_CAST(UNNEST(string_split($in_flight, ',')) AS BIGINT) AS o)
        WHERE o IS NOT NULL)
{%- if by_priority %}
GROUP BY m.conversation_group_id
ORDER BY MAX(m.priority) DESC, MIN(m.queuing_order)
LIMIT 1
{%- else %}
HAVING COUNT(*) > 0
{%- endif %}
