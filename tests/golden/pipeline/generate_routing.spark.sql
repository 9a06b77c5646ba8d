-- as one query
WITH route_number AS (
  SELECT
    n.n AS k,
    CAST(n.n AS DOUBLE) / CAST(p.route_count AS DOUBLE) AS share,
    CAST(FLOOR(p.route_count * 0.45) AS BIGINT) AS base,
    n.n >= p.route_count - 3 - CAST(FLOOR(p.route_count * 0.001) AS BIGINT) AS is_wildcard,
    p.seed,
    p.start_us,
    p.span_us
  FROM numbers AS n
  CROSS JOIN params AS p
  WHERE
    n.n < p.route_count
), shaped AS (
  SELECT
    g.*,
    CASE
      WHEN g.share >= 0.45 AND g.share < 0.65
      THEN g.base + (
        g.k - g.base
      ) DIV 3
      ELSE g.k
    END AS service_number
  FROM route_number AS g
)
SELECT
  CAST(CASE
    WHEN s.share >= 0.95 AND NOT s.is_wildcard
    THEN 4
    ELSE 5 + s.service_number % 3
  END AS INT) AS database_id,
  CAST(65546 + s.k AS INT) AS route_id,
  'Route' || LPAD(CAST(s.k AS STRING), 7, '0') AS name,
  CASE
    WHEN s.is_wildcard
    THEN CAST(NULL AS STRING)
    ELSE 'svc_' || LPAD(CAST(s.service_number AS STRING), 7, '0')
  END AS remote_service_name,
  CASE
    WHEN s.share >= 0.45 AND s.share < 0.65
    THEN (
      SUBSTRING(MD5(s.seed || '|broker|' || CAST(s.k AS STRING)), 1, 8) || '-' || SUBSTRING(MD5(s.seed || '|broker|' || CAST(s.k AS STRING)), 9, 4) || '-4' || SUBSTRING(MD5(s.seed || '|broker|' || CAST(s.k AS STRING)), 14, 3) || '-8' || SUBSTRING(MD5(s.seed || '|broker|' || CAST(s.k AS STRING)), 18, 3) || '-' || SUBSTRING(MD5(s.seed || '|broker|' || CAST(s.k AS STRING)), 21, 12)
    )
  END AS broker_instance,
  CASE
    WHEN s.share >= 0.8 AND s.share < 0.95
    THEN CAST(TIMESTAMP_MICROS(s.start_us + s.span_us * (
      1 + s.k % 4
    ) DIV 5) AS TIMESTAMP_NTZ)
  END AS lifetime,
  CASE
    WHEN s.share >= 0.72 AND s.share < 0.8
    THEN 'LOCAL'
    ELSE 'tcp://host' || LPAD(CAST(s.k % 100 AS STRING), 3, '0') || '.example.com:4022'
  END AS address,
  CASE
    WHEN s.share >= 0.65 AND s.share < 0.72
    THEN 'tcp://mirror' || LPAD(CAST(s.k % 100 AS STRING), 3, '0') || '.example.com:4022'
  END AS mirror_address,
  CAST(TIMESTAMP_MICROS(s.start_us) AS TIMESTAMP_NTZ) AS create_date
FROM shaped AS s
UNION ALL
SELECT
  CAST(a.database_id AS INT) AS database_id,
  CAST(65536 + a.database_id AS INT) AS route_id,
  'AutoCreatedLocal' AS name,
  CAST(NULL AS STRING) AS remote_service_name,
  CAST(NULL AS STRING) AS broker_instance,
  CAST(NULL AS TIMESTAMP_NTZ) AS lifetime,
  'LOCAL' AS address,
  CAST(NULL AS STRING) AS mirror_address,
  CAST(TIMESTAMP_MICROS(p.start_us) AS TIMESTAMP_NTZ) AS create_date
FROM VALUES
  (4),
  (5),
  (6),
  (7) AS a(database_id)
CROSS JOIN params AS p

-- stage route_number (read 1x)
SELECT
  n.n AS k,
  CAST(n.n AS DOUBLE) / CAST(p.route_count AS DOUBLE) AS share,
  CAST(FLOOR(p.route_count * 0.45) AS BIGINT) AS base,
  n.n >= p.route_count - 3 - CAST(FLOOR(p.route_count * 0.001) AS BIGINT) AS is_wildcard,
  p.seed,
  p.start_us,
  p.span_us
FROM numbers AS n
CROSS JOIN params AS p
WHERE
  n.n < p.route_count

-- stage shaped (read 1x)
SELECT
  g.*,
  CASE
    WHEN g.share >= 0.45 AND g.share < 0.65
    THEN g.base + (
      g.k - g.base
    ) DIV 3
    ELSE g.k
  END AS service_number
FROM route_number AS g

-- final query
SELECT
  CAST(CASE
    WHEN s.share >= 0.95 AND NOT s.is_wildcard
    THEN 4
    ELSE 5 + s.service_number % 3
  END AS INT) AS database_id,
  CAST(65546 + s.k AS INT) AS route_id,
  'Route' || LPAD(CAST(s.k AS STRING), 7, '0') AS name,
  CASE
    WHEN s.is_wildcard
    THEN CAST(NULL AS STRING)
    ELSE 'svc_' || LPAD(CAST(s.service_number AS STRING), 7, '0')
  END AS remote_service_name,
  CASE
    WHEN s.share >= 0.45 AND s.share < 0.65
    THEN (
      SUBSTRING(MD5(s.seed || '|broker|' || CAST(s.k AS STRING)), 1, 8) || '-' || SUBSTRING(MD5(s.seed || '|broker|' || CAST(s.k AS STRING)), 9, 4) || '-4' || SUBSTRING(MD5(s.seed || '|broker|' || CAST(s.k AS STRING)), 14, 3) || '-8' || SUBSTRING(MD5(s.seed || '|broker|' || CAST(s.k AS STRING)), 18, 3) || '-' || SUBSTRING(MD5(s.seed || '|broker|' || CAST(s.k AS STRING)), 21, 12)
    )
  END AS broker_instance,
  CASE
    WHEN s.share >= 0.8 AND s.share < 0.95
    THEN CAST(TIMESTAMP_MICROS(s.start_us + s.span_us * (
      1 + s.k % 4
    ) DIV 5) AS TIMESTAMP_NTZ)
  END AS lifetime,
  CASE
    WHEN s.share >= 0.72 AND s.share < 0.8
    THEN 'LOCAL'
    ELSE 'tcp://host' || LPAD(CAST(s.k % 100 AS STRING), 3, '0') || '.example.com:4022'
  END AS address,
  CASE
    WHEN s.share >= 0.65 AND s.share < 0.72
    THEN 'tcp://mirror' || LPAD(CAST(s.k % 100 AS STRING), 3, '0') || '.example.com:4022'
  END AS mirror_address,
  CAST(TIMESTAMP_MICROS(s.start_us) AS TIMESTAMP_NTZ) AS create_date
FROM shaped AS s
UNION ALL
SELECT
  CAST(a.database_id AS INT) AS database_id,
  CAST(65536 + a.database_id AS INT) AS route_id,
  'AutoCreatedLocal' AS name,
  CAST(NULL AS STRING) AS remote_service_name,
  CAST(NULL AS STRING) AS broker_instance,
  CAST(NULL AS TIMESTAMP_NTZ) AS lifetime,
  'LOCAL' AS address,
  CAST(NULL AS STRING) AS mirror_address,
  CAST(TIMESTAMP_MICROS(p.start_us) AS TIMESTAMP_NTZ) AS create_date
FROM VALUES
  (4),
  (5),
  (6),
  (7) AS a(database_id)
CROSS JOIN params AS p
