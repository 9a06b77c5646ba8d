-- `pybroker send`: every service name the instance knows, to suggest one for a name no
-- route leads to: the services of its databases and the services its routes name (R1).
SELECT name FROM sys.services
UNION
SELECT remote_service_name FROM sys.routes WHERE remote_service_name IS NOT NULL
ORDER BY 1
