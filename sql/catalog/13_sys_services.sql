-- sys.services: services with their database and queue.
CREATE OR REPLACE VIEW sys.services AS
SELECT d.name AS database_name, s.name, s.queue_name, s.create_date
FROM main.services AS s
JOIN main.databases AS d ON d.database_id = s.database_id
