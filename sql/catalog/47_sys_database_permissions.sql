-- sys.database_permissions: SEND on services (GRANT, DENY SEND ON SERVICE), per database,
-- the service and the grantee by name ('public': every user); state 'G' GRANT or 'D' DENY.
CREATE OR REPLACE VIEW sys.database_permissions AS
SELECT d.name AS database_name, p.class_desc, p.object_name, p.grantee, p.permission_name,
    p.state, CASE p.state WHEN 'D' THEN 'DENY' ELSE 'GRANT' END AS state_desc
FROM main.broker_permissions AS p
JOIN main.databases AS d ON d.database_id = p.database_id
WHERE p.class_desc = 'SERVICE'
