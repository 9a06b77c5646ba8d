-- User databases are numbered from 5, after master (1), tempdb (2), model (3) and msdb (4).
INSERT INTO databases (database_id, name, service_broker_guid, is_broker_enabled, create_date)
SELECT GREATEST(5, COALESCE(MAX(d.database_id), 0) + 1), $name, $service_broker_guid, TRUE, $now
FROM databases AS d
RETURNING database_id
