-- as one query
SELECT
  COUNT(*) AS conversation_rows,
  COUNT(DISTINCT XXHASH64(c.conversation_id)) AS distinct_hashes
FROM conversations AS c

-- final query
SELECT
  COUNT(*) AS conversation_rows,
  COUNT(DISTINCT XXHASH64(c.conversation_id)) AS distinct_hashes
FROM conversations AS c
