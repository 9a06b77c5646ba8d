-- R9.2: the answer to a mirrored route's probe: the role here of the databases that have
-- the service (and the broker identifier, when the probe names one); a database that is
-- not mirrored serves, as a principal does. PRINCIPAL first: one serving database is enough.
SELECT COALESCE(m.mirroring_role, 'PRINCIPAL') AS role
FROM services AS s
JOIN databases AS d ON d.database_id = s.database_id
LEFT JOIN database_mirroring AS m ON m.database_id = d.database_id
WHERE s.name = $service_name
    AND ($broker_instance IS NULL OR d.service_broker_guid = $broker_instance)
ORDER BY CASE COALESCE(m.mirroring_role, 'PRINCIPAL') WHEN 'PRINCIPAL' THEN 0 ELSE 1 END
LIMIT 1
