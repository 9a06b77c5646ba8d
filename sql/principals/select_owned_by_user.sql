-- What a user owns or is named by, which DROP USER refuses to leave without it: the peers'
-- certificates it owns (master) and the remote service bindings naming it.
SELECT 'certificate ' || c.name FROM trusted_certificates AS c
WHERE $database_id = 1 AND lower(c.principal_name) = $name_key
UNION ALL
SELECT 'remote service binding ' || b.name FROM remote_service_bindings AS b
WHERE b.database_id = $database_id AND lower(b.user_name) = $name_key
ORDER BY 1
