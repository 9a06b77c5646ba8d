-- The databases that are the MIRROR of a pair: they take no message (R9.3).
SELECT m.database_id
FROM database_mirroring AS m
WHERE m.mirroring_role = 'MIRROR'
