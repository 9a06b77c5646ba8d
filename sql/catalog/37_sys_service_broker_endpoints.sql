-- sys.service_broker_endpoints: the broker endpoint the instance file defines (P2), in SQL
-- Server's columns and codes (protocol 2 TCP, type 3 SERVICE_BROKER, state 0 STARTED,
-- 1 STOPPED, 2 DISABLED, connection_auth 4 CERTIFICATE, encryption_algorithm 0 NONE or
-- 2 AES). state_desc is the defined state: whether a process has it listening now is not
-- something a view of the file can know (Instance.endpoint, or `pybroker serve`'s output,
-- says). Forwarding is the instance's setting (R7.3), which MESSAGE_FORWARD_SIZE writes.
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
