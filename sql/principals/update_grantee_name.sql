-- ALTER LOGIN | USER ... WITH NAME = new: what was granted or denied to the principal is
-- its under the new name (the endpoint's permissions for a login, on master; a database's
-- for a user).
UPDATE broker_permissions SET grantee = $name, grantee_key = $new_key
WHERE database_id = $database_id AND grantee_key = $name_key
    AND (class_desc = 'ENDPOINT') = $of_login
