-- sys.service_queues: queues with their database and status (ON = is_receive_enabled).
CREATE OR REPLACE VIEW sys.service_queues AS
SELECT d.name AS database_name, q.name, q.is_receive_enabled, q.is_enqueue_enabled,
    q.create_date
FROM main.service_queues AS q
JOIN main.databases AS d ON d.database_id = q.database_id
