-- GRANT: granting again what is granted changes nothing, as in SQL Server.
INSERT INTO broker_permissions (database_id, class_desc, object_name, permission_name,
    grantee, grantee_key, create_date)
VALUES ($database_id, $class_desc, $object_name, $permission_name, $grantee, $grantee_key,
    $create_date)
ON CONFLICT DO NOTHING
