-- sys.queue_messages: the contents of every queue, as SELECT * FROM <queue> shows them in
-- SQL Server. status: 0 retained, 1 ready, 2 incomplete / out of order, 3 retained sent.
CREATE OR REPLACE VIEW sys.queue_messages AS
SELECT d.name AS database_name, m.queue_name, m.status,
    CASE m.status WHEN 0 THEN 'RETAINED' WHEN 1 THEN 'READY'
        WHEN 2 THEN 'INCOMPLETE' WHEN 3 THEN 'RETAINED_SENT' END AS status_desc,
    m.priority, m.queuing_order, m.conversation_group_id, m.conversation_handle,
    m.message_sequence_number, m.service_name, m.service_contract_name, m.message_type_name,
    m.validation, m.message_body,
    -- the body as text when it is UTF-8 (NULL otherwise), for reading at a glance
    TRY(decode(m.message_body)) AS casted_message_body,
    m.message_enqueue_time
FROM main.queue_messages AS m
JOIN main.databases AS d ON d.database_id = m.database_id
