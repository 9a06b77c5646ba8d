-- `pybroker demo`, across processes: what waits in the queues of an instance (C3).
SELECT database_name, queue_name, message_sequence_number, message_type_name,
    casted_message_body
FROM sys.queue_messages
ORDER BY queuing_order
