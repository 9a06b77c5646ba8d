-- The pairs of services dialogs were begun between, from the initiators' endpoints (C1).
SELECT DISTINCT e.database_name, e.service_name, e.far_service
FROM sys.conversation_endpoints AS e
WHERE e.is_initiator
ORDER BY e.database_name, e.service_name, e.far_service
