-- What this instance answers a mirrored route's probe for $service_name (and
-- $broker_instance) (R9.2): the role of the databases that have the service, PRINCIPAL
-- first; a database not mirrored serves as a principal does. No row: it claims none.
SELECT COALESCE(m.mirroring_role_desc, 'PRINCIPAL') AS role
FROM sys.services AS s
JOIN sys.databases AS d ON d.name = s.database_name
LEFT JOIN sys.database_mirroring AS m ON m.database_id = d.database_id
WHERE s.name = $service_name
    AND ($broker_instance IS NULL OR d.service_broker_guid = lower($broker_instance))
ORDER BY CASE COALESCE(m.mirroring_role_desc, 'PRINCIPAL') WHEN 'PRINCIPAL' THEN 0 ELSE 1 END
LIMIT 1
