-- The conversation endpoints of a service (DROP SERVICE ends them).
SELECT e.conversation_handle, e.conversation_id, e.is_initiator
FROM conversation_endpoints AS e
WHERE e.database_id = $database_id AND e.service_name = $service_name
ORDER BY e.create_date
