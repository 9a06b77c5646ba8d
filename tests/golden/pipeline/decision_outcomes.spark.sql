-- as one query
SELECT
  d.outcome,
  d.decided_by,
  COUNT(*) AS conversations
FROM decisions AS d
GROUP BY
  d.outcome,
  d.decided_by

-- final query
SELECT
  d.outcome,
  d.decided_by,
  COUNT(*) AS conversations
FROM decisions AS d
GROUP BY
  d.outcome,
  d.decided_by
