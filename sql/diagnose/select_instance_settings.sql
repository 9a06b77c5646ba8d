-- Forwarding (R7.3) and this instance's own endpoint certificate (PEM, never the key).
SELECT s.is_forwarding_enabled, s.endpoint_certificate
FROM main.instance_settings AS s
