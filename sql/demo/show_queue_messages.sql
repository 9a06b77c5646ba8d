-- `pybroker demo`: what waits in the demo's queues, as SELECT * FROM <queue> shows it (C3).
SELECT database_name, queue_name, status_desc, message_sequence_number, message_type_name,
    casted_message_body
FROM sys.queue_messages
WHERE database_name IN ('Shop', 'Warehouse')
ORDER BY queuing_order
