-- sys.service_queues: queues with their database and status (ON = is_receive_enabled),
-- retention and poison-message handling (C3).
CREATE OR REPLACE VIEW sys.service_queues AS
SELECT d.name AS database_name, q.name, q.is_receive_enabled, q.is_enqueue_enabled,
    q.create_date, COALESCE(q.is_retention_enabled, FALSE) AS is_retention_enabled,
    COALESCE(q.is_poison_message_handling_enabled, TRUE) AS is_poison_message_handling_enabled
FROM main.service_queues AS q
JOIN main.databases AS d ON d.database_id = q.database_id
