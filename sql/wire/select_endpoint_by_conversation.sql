-- The endpoint of one side of a conversation, for a message or notice from the network.
SELECT e.conversation_handle, e.database_id
FROM conversation_endpoints AS e
WHERE e.conversation_id = $conversation_id AND e.is_initiator = $is_initiator
ORDER BY e.create_date
