-- as one query
SELECT
  c.conversation_id,
  COUNT(*) AS copies
FROM conversations AS c
GROUP BY
  c.conversation_id
HAVING
  COUNT(*) > 1
ORDER BY
  c.conversation_id NULLS LAST
LIMIT 5

-- final query
SELECT
  c.conversation_id,
  COUNT(*) AS copies
FROM conversations AS c
GROUP BY
  c.conversation_id
HAVING
  COUNT(*) > 1
ORDER BY
  c.conversation_id NULLS LAST
LIMIT 5
