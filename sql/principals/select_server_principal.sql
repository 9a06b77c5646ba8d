-- A login (CREATE LOGIN) by name, without regard to case.
SELECT l.name, l.type_desc, l.certificate_name FROM server_principals AS l
WHERE l.name_key = $name_key
