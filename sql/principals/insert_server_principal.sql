-- CREATE LOGIN: principal ids from 256, as SQL Server's logins begin above its own.
INSERT INTO server_principals (principal_id, name, name_key, type_desc, certificate_name,
    create_date, is_disabled)
SELECT COALESCE(MAX(l.principal_id), 255) + 1, $name, $name_key, $type_desc,
    $certificate_name, $create_date, FALSE
FROM server_principals AS l
