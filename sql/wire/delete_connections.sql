-- The connection snapshot is replaced as a whole (sys.dm_broker_connections).
DELETE FROM broker_connections
