-- `pybroker messages`: one queue's messages in queuing order, as SELECT * FROM <queue>
-- shows them in SQL Server (C3), the body as text when it is UTF-8.
SELECT m.status_desc AS status, m.queuing_order, m.conversation_handle,
    m.message_sequence_number, m.service_name, m.service_contract_name,
    m.message_type_name, octet_length(m.message_body) AS message_size,
    COALESCE(m.casted_message_body, '0x' || upper(hex(m.message_body))) AS message_body
FROM sys.queue_messages AS m
WHERE m.database_name = $database AND m.queue_name = $queue
ORDER BY m.queuing_order NULLS LAST, m.message_enqueue_time
