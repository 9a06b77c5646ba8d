-- queue_contents('AdventureWorks2008R2', 'InventoryQueue'): one queue, in queuing order,
-- like SELECT * FROM InventoryQueue in SQL Server.
CREATE OR REPLACE MACRO queue_contents(of_database, of_queue) AS TABLE
SELECT m.status, m.priority, m.queuing_order, m.conversation_group_id,
    m.conversation_handle, m.message_sequence_number, m.service_name,
    m.service_contract_name, m.message_type_name, m.validation, m.message_body,
    m.casted_message_body, m.message_enqueue_time
FROM sys.queue_messages AS m
WHERE m.database_name = of_database AND m.queue_name = of_queue
ORDER BY m.queuing_order
