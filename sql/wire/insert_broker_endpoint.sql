-- CREATE ENDPOINT: the instance's one broker endpoint (the primary key refuses a second).
INSERT INTO broker_endpoints (endpoint_id, name, state_desc, listener_port, listener_ip,
    certificate_name, is_encryption_enabled)
VALUES (nextval('endpoint_id_seq'), $name, $state_desc, $listener_port, $listener_ip,
    $certificate_name, $is_encryption_enabled)
