-- MOVE CONVERSATION: where a conversation group lives, as the open endpoints of the group
-- say it (the database and the service of each; the service names the queue). No row: no
-- open conversation of the instance is in the group.
SELECT DISTINCT e.database_id, e.service_name
FROM conversation_endpoints AS e
WHERE e.conversation_group_id = $conversation_group_id AND e.state <> 'CD'
ORDER BY e.database_id, e.service_name
