-- The other side of a conversation, if it lives in database $database_id of this instance.
SELECT e.conversation_handle
FROM conversation_endpoints AS e
WHERE e.conversation_id = $conversation_id AND e.is_initiator = $is_initiator
    AND e.database_id = $database_id
