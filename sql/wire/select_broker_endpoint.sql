-- The broker endpoint the instance file defines (CREATE ENDPOINT on master), if any.
SELECT e.name, e.state_desc, e.listener_port, e.listener_ip, e.certificate_name,
    e.is_encryption_enabled
FROM broker_endpoints AS e
