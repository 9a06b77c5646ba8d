-- CREATE USER: principal ids from 5 in each database, as SQL Server's users begin above
-- dbo, guest, INFORMATION_SCHEMA and sys.
INSERT INTO database_principals (database_id, principal_id, name, name_key, type_desc,
    login_name, certificate_name, create_date)
SELECT $database_id, COALESCE(MAX(u.principal_id), 4) + 1, $name, $name_key, $type_desc,
    $login_name, $certificate_name, $create_date
FROM database_principals AS u WHERE u.database_id = $database_id
