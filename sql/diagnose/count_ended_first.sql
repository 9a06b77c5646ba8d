-- Target endpoints whose initiator ended the dialog first (fire and forget): the target is
-- DISCONNECTED_INBOUND (C1: the initiator's EndDialog arrived), by database, target service
-- and initiator service, with how many of their initiators this instance holds CLOSED and
-- the oldest create_date.
SELECT e.database_name, e.service_name, e.far_service, count(*) AS endpoints,
    count(i.conversation_handle) AS initiators_closed, min(e.create_date) AS oldest
FROM sys.conversation_endpoints AS e
LEFT JOIN sys.conversation_endpoints AS i ON i.conversation_id = e.conversation_id
    AND i.is_initiator AND i.state_desc = 'CLOSED'
WHERE NOT e.is_initiator AND e.state_desc = 'DISCONNECTED_INBOUND'
GROUP BY e.database_name, e.service_name, e.far_service
ORDER BY e.database_name, e.service_name, e.far_service
