-- CREATE CERTIFICATE name WITH SUBJECT = '...' names this instance's endpoint certificate.
UPDATE instance_settings SET endpoint_certificate_name = $name
