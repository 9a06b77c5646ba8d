-- Target endpoints whose initiator ended the dialog first (DISCONNECTED_INBOUND, C1) and
-- whose initiator this instance holds CLOSED, by database, target service and initiator
-- service.
SELECT e.database_name, e.service_name, e.far_service, count(*) AS initiators_closed
FROM sys.conversation_endpoints AS e
JOIN sys.conversation_endpoints AS i ON i.conversation_id = e.conversation_id
    AND i.is_initiator AND i.state_desc = 'CLOSED'
WHERE NOT e.is_initiator AND e.state_desc = 'DISCONNECTED_INBOUND'
GROUP BY e.database_name, e.service_name, e.far_service
ORDER BY e.database_name, e.service_name, e.far_service
