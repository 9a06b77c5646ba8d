-- DROP LOGIN.
DELETE FROM server_principals WHERE name_key = $name_key
