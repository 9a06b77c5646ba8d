-- sys.service_broker_endpoints: the broker endpoint the instance file defines (P2), in SQL
-- Server's columns and codes (protocol 2 TCP, type 3 SERVICE_BROKER, state 0 STARTED,
-- 1 STOPPED, 2 DISABLED, connection_auth 4 CERTIFICATE, encryption_algorithm 0 NONE or
-- 2 AES). state_desc is the defined state. When the file defines none, the endpoint a
-- process runs with the defaults (`pybroker serve` on 127.0.0.1:4022, or its --port and
-- --host; Instance.start_endpoint()) is the row, named DefaultBrokerEndpoint with no
-- endpoint_id, as long as it listens (broker_listeners, migrations/019, which
-- pybroker/kernel/live_views.py writes when this view is read). Forwarding is the instance's
-- setting (R7.3), which MESSAGE_FORWARD_SIZE writes.
-- certificate_name stands in for SQL Server's certificate_id (NULL: this instance's own
-- certificate, unnamed).
CREATE OR REPLACE VIEW sys.service_broker_endpoints AS
SELECT e.name, e.endpoint_id,
    2 AS protocol, 'TCP' AS protocol_desc,
    3 AS type, 'SERVICE_BROKER' AS type_desc,
    CASE e.state_desc WHEN 'STARTED' THEN 0 WHEN 'STOPPED' THEN 1 ELSE 2 END AS state,
    e.state_desc,
    FALSE AS is_admin_endpoint,
    s.is_forwarding_enabled AS is_message_forwarding_enabled,
    s.forwarding_size_mb AS message_forwarding_size,
    4 AS connection_auth, 'CERTIFICATE' AS connection_auth_desc,
    e.certificate_name,
    CASE WHEN e.is_encryption_enabled THEN 2 ELSE 0 END AS encryption_algorithm,
    CASE WHEN e.is_encryption_enabled THEN 'AES' ELSE 'NONE' END AS encryption_algorithm_desc
FROM main.broker_endpoints AS e
CROSS JOIN main.instance_settings AS s
UNION ALL
SELECT 'DefaultBrokerEndpoint' AS name, NULL::INTEGER AS endpoint_id,
    2, 'TCP', 3, 'SERVICE_BROKER', 0, 'STARTED', FALSE,
    s.is_forwarding_enabled, s.forwarding_size_mb, 4, 'CERTIFICATE', NULL::VARCHAR,
    CASE WHEN l.is_encryption_enabled THEN 2 ELSE 0 END,
    CASE WHEN l.is_encryption_enabled THEN 'AES' ELSE 'NONE' END
FROM main.broker_listeners AS l
CROSS JOIN main.instance_settings AS s
WHERE NOT EXISTS (SELECT 1 FROM main.broker_endpoints)
