{#-
  queue_contents('AdventureWorks2008R2', 'InventoryQueue'): one queue, in queuing order,
  like SELECT * FROM InventoryQueue in SQL Server. A database or queue that does not exist
  raises, naming those that do.
-#}
{% from 'catalog/_known_names.sql' import known_database, known_queue %}
CREATE OR REPLACE MACRO queue_contents(of_database, of_queue) AS TABLE
SELECT m.status, m.priority, m.queuing_order, m.conversation_group_id,
    m.conversation_handle, m.message_sequence_number, m.service_name,
    m.service_contract_name, m.message_type_name, m.validation, m.message_body,
    m.casted_message_body, m.message_enqueue_time
FROM (
    SELECT {{ known_database('queue_contents', 'of_database', 'database') }} AS database_name,
        {{ known_queue('queue_contents', 'of_database', 'of_queue') }} AS queue_name
) AS q
JOIN sys.queue_messages AS m
    ON m.database_name = q.database_name AND m.queue_name = q.queue_name
ORDER BY m.queuing_order
