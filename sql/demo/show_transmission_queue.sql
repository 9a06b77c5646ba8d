-- `pybroker demo`: messages that have not left the demo's databases, and why (C4).
SELECT database_name, from_service_name, to_service_name, message_sequence_number,
    message_type_name, TRY(decode(message_body)) AS message_body, transmission_status
FROM sys.transmission_queue
WHERE database_name IN ('Shop', 'Warehouse')
ORDER BY enqueue_time, message_sequence_number
