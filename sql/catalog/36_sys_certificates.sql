-- sys.certificates: the peers this instance trusts (never a private key).
CREATE OR REPLACE VIEW sys.certificates AS
SELECT c.name, c.thumbprint, c.subject, c.start_date, c.expiry_date, c.create_date
FROM main.trusted_certificates AS c
