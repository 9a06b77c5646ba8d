-- sys.dm_broker_activated_tasks: one row per running reader started by activation. spid
-- numbers the readers of the process; execute_as as in sys.service_queues (1 SELF, -2
-- OWNER). As they are when read (pybroker/kernel/live_views.py).
CREATE OR REPLACE VIEW sys.dm_broker_activated_tasks AS
SELECT t.spid, t.database_id, d.name AS database_name, t.queue_name, t.procedure_name,
    CASE t.execute_as WHEN 'SELF' THEN 1 WHEN 'OWNER' THEN -2 END AS execute_as,
    t.start_time
FROM main.broker_activated_tasks AS t
JOIN main.databases AS d ON d.database_id = t.database_id
