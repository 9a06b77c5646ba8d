-- DROP USER.
DELETE FROM database_principals WHERE database_id = $database_id AND name_key = $name_key
