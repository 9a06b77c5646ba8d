-- sys.database_mirroring: one row per database, in SQL Server's columns; NULLs for a
-- database that is not part of a mirrored pair. mirroring_state_desc is SUSPENDED for
-- every partner: pybroker moves no data between the two (only the role is kept, R9).
CREATE OR REPLACE VIEW sys.database_mirroring AS
SELECT d.database_id, d.name AS database_name,
    m.mirroring_role AS mirroring_role_desc,
    CASE m.mirroring_role WHEN 'PRINCIPAL' THEN 1 WHEN 'MIRROR' THEN 2 END AS mirroring_role,
    m.mirroring_partner_name,
    CASE WHEN m.database_id IS NOT NULL THEN 'SUSPENDED' END AS mirroring_state_desc,
    m.role_change_time
FROM main.databases AS d
LEFT JOIN main.database_mirroring AS m ON m.database_id = d.database_id
