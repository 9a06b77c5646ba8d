-- sys.dm_broker_queue_monitors: one row per queue monitor of the process running activation
-- (Instance.start_activation, `pybroker serve`), in SQL Server's columns with the queue
-- named (pybroker's queues have no object ids). As they are when read (pybroker/kernel/live_views.py);
-- empty when no process runs activation on the file.
CREATE OR REPLACE VIEW sys.dm_broker_queue_monitors AS
SELECT m.database_id, d.name AS database_name, m.queue_name, m.state,
    m.last_empty_rowset_time, m.last_activated_time, m.tasks_waiting
FROM main.broker_queue_monitors AS m
JOIN main.databases AS d ON d.database_id = m.database_id
