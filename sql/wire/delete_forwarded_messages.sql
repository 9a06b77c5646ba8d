-- The forwarded-messages snapshot is replaced as a whole (sys.dm_broker_forwarded_messages).
DELETE FROM broker_forwarded_messages
