-- A user of a database (CREATE USER) by name, without regard to case.
SELECT u.name, u.type_desc, u.login_name, u.certificate_name FROM database_principals AS u
WHERE u.database_id = $database_id AND u.name_key = $name_key
