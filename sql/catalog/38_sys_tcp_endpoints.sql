-- sys.tcp_endpoints: the TCP listener of the broker endpoint the instance file defines (P2),
-- in SQL Server's columns. ip_address is NULL for LISTENER_IP = ALL (pybroker listens on
-- 127.0.0.1 then); LISTENER_PORT = 0 is a dynamic port (is_dynamic_port), whose number is
-- chosen by the process that starts the endpoint and so is not in the file: port stays 0.
-- As in sys.service_broker_endpoints, state_desc is the defined state, and when the file
-- defines none, the endpoint a process runs with the defaults is the row, with the address
-- and port it listens on.
CREATE OR REPLACE VIEW sys.tcp_endpoints AS
SELECT e.name, e.endpoint_id,
    2 AS protocol, 'TCP' AS protocol_desc,
    3 AS type, 'SERVICE_BROKER' AS type_desc,
    CASE e.state_desc WHEN 'STARTED' THEN 0 WHEN 'STOPPED' THEN 1 ELSE 2 END AS state,
    e.state_desc,
    FALSE AS is_admin_endpoint,
    e.listener_port AS port,
    e.listener_port = 0 AS is_dynamic_port,
    e.listener_ip AS ip_address
FROM main.broker_endpoints AS e
UNION ALL
SELECT 'DefaultBrokerEndpoint' AS name, NULL::INTEGER AS endpoint_id,
    2, 'TCP', 3, 'SERVICE_BROKER', 0, 'STARTED', FALSE,
    CAST(regexp_extract(l.address, ':(\d+)$', 1) AS INTEGER), FALSE,
    regexp_extract(l.address, '^tcp://\[?(.*?)\]?:\d+$', 1)
FROM main.broker_listeners AS l
WHERE NOT EXISTS (SELECT 1 FROM main.broker_endpoints)
