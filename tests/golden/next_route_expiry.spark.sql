/* The earliest instant after $now at which a route expires (R1.4): until then every */
/* routing answer computed at $now stays true. */
SELECT
  MIN(r.lifetime) AS next_expiry
FROM routes AS r
WHERE
  r.lifetime > CAST(:now AS TIMESTAMP_NTZ)
