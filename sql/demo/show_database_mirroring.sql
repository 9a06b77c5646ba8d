-- `pybroker demo`, across processes: a database's role in its mirrored pair (R9).
SELECT database_name, mirroring_role_desc, mirroring_partner_name
FROM sys.database_mirroring
WHERE mirroring_role_desc IS NOT NULL
