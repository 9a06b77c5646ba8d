-- sys.msdb_routes: msdb's routing table, the one messages from outside are routed with (R1.2).
CREATE OR REPLACE VIEW sys.msdb_routes AS
SELECT r.name, r.route_id, r.remote_service_name, r.broker_instance, r.lifetime, r.address,
    r.mirror_address, r.is_expired, r.create_date
FROM sys.routes AS r
WHERE r.database_name = 'msdb'
