-- The task snapshot is replaced as a whole (sys.dm_broker_activated_tasks).
DELETE FROM broker_activated_tasks
