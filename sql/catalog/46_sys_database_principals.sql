-- sys.database_principals: the users of every database (CREATE USER), with the login or
-- the certificate each is mapped to (both NULL: WITHOUT LOGIN).
CREATE OR REPLACE VIEW sys.database_principals AS
SELECT d.name AS database_name, u.name, u.principal_id, u.type_desc, u.login_name,
    u.certificate_name, u.create_date
FROM main.database_principals AS u
JOIN main.databases AS d ON d.database_id = u.database_id
