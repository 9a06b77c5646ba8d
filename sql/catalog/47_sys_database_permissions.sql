-- sys.database_permissions: SEND on services (GRANT SEND ON SERVICE), per database, the
-- service and the grantee by name ('public': every user).
CREATE OR REPLACE VIEW sys.database_permissions AS
SELECT d.name AS database_name, p.class_desc, p.object_name, p.grantee, p.permission_name,
    'GRANT' AS state_desc
FROM main.broker_permissions AS p
JOIN main.databases AS d ON d.database_id = p.database_id
WHERE p.class_desc = 'SERVICE'
