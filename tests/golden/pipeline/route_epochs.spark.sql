-- as one query
SELECT
  e.routed_at,
  LEAD(e.routed_at) OVER (ORDER BY e.routed_at NULLS LAST) AS epoch_end
FROM (
  SELECT
    CAST('0001-01-01 00:00:00' AS TIMESTAMP_NTZ) AS routed_at
  UNION
  SELECT
    r.lifetime AS routed_at
  FROM state_routes AS r
  WHERE
    NOT r.lifetime IS NULL
) AS e

-- final query
SELECT
  e.routed_at,
  LEAD(e.routed_at) OVER (ORDER BY e.routed_at NULLS LAST) AS epoch_end
FROM (
  SELECT
    CAST('0001-01-01 00:00:00' AS TIMESTAMP_NTZ) AS routed_at
  UNION
  SELECT
    r.lifetime AS routed_at
  FROM state_routes AS r
  WHERE
    NOT r.lifetime IS NULL
) AS e
