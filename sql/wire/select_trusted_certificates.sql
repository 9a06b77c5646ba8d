-- The peers this instance admits, by name, with their certificates.
SELECT c.name, c.certificate FROM trusted_certificates AS c ORDER BY c.name
