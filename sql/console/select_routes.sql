-- the console's routes: every routing table of the instance, msdb's included
SELECT database_name, name, remote_service_name, broker_instance, address, mirror_address,
    lifetime, is_expired
FROM sys.routes
ORDER BY database_name, name
