-- The databases in a mirrored pair and their role (R9): a MIRROR takes no message (R9.3);
-- a PRINCIPAL refuses a later message of a conversation it has no endpoint for (nothing
-- is replicated: it began at the pair's former principal).
SELECT m.database_id, m.mirroring_role
FROM database_mirroring AS m
WHERE m.mirroring_role IN ('PRINCIPAL', 'MIRROR')
