-- A peer's certificate kept in master (CREATE CERTIFICATE ... FROM FILE), by name.
SELECT c.certificate, c.principal_name FROM trusted_certificates AS c WHERE c.name = $name
