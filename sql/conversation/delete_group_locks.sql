-- The rows of sys.dm_broker_conversation_group_locks of the last read (migrations/021).
DELETE FROM broker_conversation_group_locks
