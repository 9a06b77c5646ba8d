-- ALTER ENDPOINT: the definition as altered (name and endpoint_id stay).
UPDATE broker_endpoints
SET state_desc = $state_desc, listener_port = $listener_port, listener_ip = $listener_ip,
    certificate_name = $certificate_name, is_encryption_enabled = $is_encryption_enabled
