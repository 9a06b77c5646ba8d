-- sys.server_permissions: CONNECT on the broker endpoint (GRANT CONNECT ON ENDPOINT),
-- the endpoint and the grantee by name ('public': every login).
CREATE OR REPLACE VIEW sys.server_permissions AS
SELECT p.class_desc, p.object_name, p.grantee, p.permission_name, 'GRANT' AS state_desc
FROM main.broker_permissions AS p
WHERE p.class_desc = 'ENDPOINT'
