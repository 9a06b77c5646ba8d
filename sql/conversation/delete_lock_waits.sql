-- The rows of sys.dm_broker_waits of the last read (migrations/021).
DELETE FROM broker_lock_waits
