-- Target endpoints not ended (CONVERSING or DISCONNECTED_INBOUND, C1) by database and target
-- service, and how many of them were created before $created_before (the leak threshold).
SELECT e.database_name, e.service_name, count(*) AS endpoints,
    count(*) FILTER (WHERE e.create_date < $created_before) AS older,
    count(*) FILTER (WHERE e.create_date < $created_before
        AND e.state_desc = 'DISCONNECTED_INBOUND') AS disconnected
FROM sys.conversation_endpoints AS e
WHERE NOT e.is_initiator AND e.state_desc IN ('CONVERSING', 'DISCONNECTED_INBOUND')
GROUP BY e.database_name, e.service_name
ORDER BY e.database_name, e.service_name
