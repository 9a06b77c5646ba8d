-- sys.server_permissions: CONNECT on the broker endpoint (GRANT, DENY CONNECT ON
-- ENDPOINT), the endpoint and the grantee by name ('public': every login); state 'G' GRANT
-- or 'D' DENY, as SQL Server's.
CREATE OR REPLACE VIEW sys.server_permissions AS
SELECT p.class_desc, p.object_name, p.grantee, p.permission_name, p.state,
    CASE p.state WHEN 'D' THEN 'DENY' ELSE 'GRANT' END AS state_desc
FROM main.broker_permissions AS p
WHERE p.class_desc = 'ENDPOINT'
