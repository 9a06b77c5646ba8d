-- A database's role in a mirrored pair and its partner's address (R9).
INSERT INTO database_mirroring (database_id, mirroring_role, mirroring_partner_name,
    role_change_time)
VALUES ($database_id, $mirroring_role, $mirroring_partner_name, $now)
