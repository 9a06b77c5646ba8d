-- `pybroker conversations`: each side of every conversation held here (C1), of one
-- database or all, with how many of its messages wait to leave and why (C4).
SELECT e.database_name AS database, e.conversation_handle, e.is_initiator,
    e.service_name AS service, e.far_service, e.service_contract_name AS contract,
    e.state_desc AS state, e.error_code, e.error_description,
    count(t.message_sequence_number) AS waiting,
    NULLIF(max(t.transmission_status), '') AS transmission_status
FROM sys.conversation_endpoints AS e
LEFT JOIN sys.transmission_queue AS t ON t.conversation_handle = e.conversation_handle
WHERE CAST($database AS VARCHAR) IS NULL OR e.database_name = $database
GROUP BY ALL
ORDER BY e.database_name, min(e.create_date), e.conversation_handle
