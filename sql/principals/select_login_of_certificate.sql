-- The login mapped to a certificate (CREATE LOGIN ... FROM CERTIFICATE), if one is.
SELECT l.name FROM server_principals AS l WHERE l.certificate_name = $certificate_name
