-- DROP LOGIN (on master) and DROP USER: what was granted to the principal goes with it.
DELETE FROM broker_permissions WHERE database_id = $database_id AND grantee_key = $name_key
