-- The user of a database mapped to a login (CREATE USER ... FOR LOGIN), if one is.
SELECT u.name FROM database_principals AS u
WHERE u.database_id = $database_id AND lower(u.login_name) = $login_key
