-- as one query
WITH shared_hash AS (
  SELECT
    h.id_hash
  FROM (
    SELECT
      XXHASH64(c.conversation_id) AS id_hash
    FROM conversations AS c
  ) AS h
  GROUP BY
    h.id_hash
  HAVING
    COUNT(*) > 1
)
SELECT
  c.conversation_id,
  COUNT(*) AS copies
FROM conversations AS c
JOIN shared_hash AS s
  ON s.id_hash = XXHASH64(c.conversation_id)
GROUP BY
  c.conversation_id
HAVING
  COUNT(*) > 1
ORDER BY
  c.conversation_id NULLS LAST
LIMIT 5

-- stage shared_hash (read 1x)
SELECT
  h.id_hash
FROM (
  SELECT
    XXHASH64(c.conversation_id) AS id_hash
  FROM conversations AS c
) AS h
GROUP BY
  h.id_hash
HAVING
  COUNT(*) > 1

-- final query
SELECT
  c.conversation_id,
  COUNT(*) AS copies
FROM conversations AS c
JOIN shared_hash AS s
  ON s.id_hash = XXHASH64(c.conversation_id)
GROUP BY
  c.conversation_id
HAVING
  COUNT(*) > 1
ORDER BY
  c.conversation_id NULLS LAST
LIMIT 5
