-- as one query
SELECT
  TRUE AS is_forwarding_enabled,
  CAST(10 AS INT) AS forwarding_size_mb
FROM params AS p

-- final query
SELECT
  TRUE AS is_forwarding_enabled,
  CAST(10 AS INT) AS forwarding_size_mb
FROM params AS p
