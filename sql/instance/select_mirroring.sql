-- A database's part in a mirrored pair (R9): its role and partner, no row if none.
SELECT m.mirroring_role, m.mirroring_partner_name
FROM database_mirroring AS m
WHERE m.database_id = $database_id
