-- The names of every peer's certificate kept (whether or not it admits its peer now).
SELECT c.name FROM trusted_certificates AS c ORDER BY c.name
