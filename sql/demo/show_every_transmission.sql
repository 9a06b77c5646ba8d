-- `pybroker demo`, across processes: what has not left an instance yet, and why (C4).
SELECT database_name, to_service_name, message_sequence_number, message_type_name,
    transmission_status
FROM sys.transmission_queue
ORDER BY enqueue_time, message_sequence_number
