-- The other side of a conversation wherever it lives in this instance.
SELECT e.conversation_handle FROM conversation_endpoints AS e
WHERE e.conversation_id = $conversation_id AND e.is_initiator = $is_initiator
