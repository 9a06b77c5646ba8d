-- One row of sys.dm_broker_activated_tasks.
INSERT INTO broker_activated_tasks (spid, database_id, queue_name, procedure_name,
    execute_as, start_time)
VALUES ($spid, $database_id, $queue_name, $procedure_name, $execute_as, $start_time)
