-- Every routing table of one instance, msdb's included (diagnose: routes and where they go).
SELECT r.database_name, r.name, r.remote_service_name, r.broker_instance, r.address,
    r.mirror_address, r.lifetime, r.is_expired
FROM sys.routes AS r
ORDER BY r.database_name, r.name
