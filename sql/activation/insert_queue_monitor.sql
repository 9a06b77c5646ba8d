-- One row of sys.dm_broker_queue_monitors.
INSERT INTO broker_queue_monitors (database_id, queue_name, state, last_empty_rowset_time,
    last_activated_time, tasks_waiting)
VALUES ($database_id, $queue_name, $state, $last_empty_rowset_time, $last_activated_time,
    $tasks_waiting)
