-- GRANT or DENY ($state 'G' or 'D'): a principal holds one of them per permission, so a
-- DENY replaces a GRANT and a GRANT a DENY; granting again what is granted changes
-- nothing, as in SQL Server.
INSERT INTO broker_permissions (database_id, class_desc, object_name, permission_name,
    grantee, grantee_key, create_date, state)
VALUES ($database_id, $class_desc, $object_name, $permission_name, $grantee, $grantee_key,
    $create_date, $state)
ON CONFLICT DO UPDATE SET state = excluded.state
