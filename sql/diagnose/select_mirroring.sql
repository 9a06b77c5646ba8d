-- The databases of one instance that are a partner of a mirrored pair (R9), with their role
-- and their partner's address (topology: the pair drawn between the two).
SELECT m.database_name, m.mirroring_role_desc AS role, m.mirroring_partner_name AS partner
FROM sys.database_mirroring AS m
WHERE m.mirroring_role_desc IS NOT NULL
ORDER BY m.database_name
