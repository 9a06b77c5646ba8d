-- The monitor snapshot is replaced as a whole (sys.dm_broker_queue_monitors).
DELETE FROM broker_queue_monitors
