-- The conversation endpoints of a database, in a state of those given (two-letter codes).
SELECT e.conversation_handle
FROM conversation_endpoints AS e
WHERE e.database_id = $database_id AND list_contains($states, e.state)
ORDER BY e.conversation_handle
