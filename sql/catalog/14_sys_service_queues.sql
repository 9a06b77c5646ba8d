-- sys.service_queues: queues with their database and status (ON = is_receive_enabled),
-- retention and poison-message handling (C3), and their activation: the Python callable
-- (module.path:function) and how many readers may run. pybroker has no principals:
-- execute_as_principal_id is 1 (dbo) for EXECUTE AS SELF, -2 for OWNER (as SQL Server
-- shows OWNER) and NULL without activation.
CREATE OR REPLACE VIEW sys.service_queues AS
SELECT d.name AS database_name, q.name, q.is_receive_enabled, q.is_enqueue_enabled,
    q.create_date, COALESCE(q.is_retention_enabled, FALSE) AS is_retention_enabled,
    COALESCE(q.is_poison_message_handling_enabled, TRUE) AS is_poison_message_handling_enabled,
    COALESCE(q.is_activation_enabled, FALSE) AS is_activation_enabled,
    q.activation_procedure, COALESCE(q.max_readers, 0) AS max_readers,
    CASE q.activation_execute_as WHEN 'SELF' THEN 1 WHEN 'OWNER' THEN -2 END
        AS execute_as_principal_id
FROM main.service_queues AS q
JOIN main.databases AS d ON d.database_id = q.database_id
