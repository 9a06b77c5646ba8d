-- The dialogs each database began and has not seen end (initiator endpoints neither CLOSED
-- nor in ERROR, C1), by initiator service, far service, far broker identifier and contract.
SELECT e.database_name, e.service_name, e.far_service, e.far_broker_instance,
    e.service_contract_name, count(*) AS endpoints
FROM sys.conversation_endpoints AS e
WHERE e.is_initiator AND e.state_desc NOT IN ('CLOSED', 'ERROR')
GROUP BY ALL
ORDER BY ALL
