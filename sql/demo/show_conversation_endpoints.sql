-- `pybroker demo`: both sides of every conversation of the demo's databases (C1).
SELECT database_name, service_name, far_service, is_initiator, state_desc, send_sequence,
    receive_sequence
FROM sys.conversation_endpoints
WHERE database_name IN ('Shop', 'Warehouse')
ORDER BY create_date, is_initiator DESC, database_name
