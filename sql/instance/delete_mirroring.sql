-- A database leaves its mirrored pair (R9).
DELETE FROM database_mirroring WHERE database_id = $database_id
