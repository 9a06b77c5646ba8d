-- The mirrored-routes snapshot is replaced as a whole (sys.dm_broker_mirrored_routes).
DELETE FROM broker_mirrored_routes
