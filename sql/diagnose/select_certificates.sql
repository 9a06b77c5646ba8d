-- The peers this instance trusts (P2): whose certificate, and until when.
SELECT c.name, c.thumbprint, c.subject, c.expiry_date
FROM sys.certificates AS c
ORDER BY c.name
