-- REVOKE: the principal's GRANT or DENY of the permission is gone (none: nothing changes).
DELETE FROM broker_permissions
WHERE database_id = $database_id AND class_desc = $class_desc AND object_name = $object_name
    AND permission_name = $permission_name AND grantee_key = $grantee_key
