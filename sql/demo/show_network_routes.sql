-- `pybroker demo`, across processes: the routes that lead out of an instance (R1).
SELECT database_name, name, remote_service_name, address, mirror_address, lifetime
FROM sys.routes
WHERE address <> 'LOCAL'
ORDER BY database_name, name
