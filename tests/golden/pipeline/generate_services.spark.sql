-- as one query
WITH local_service AS (
  SELECT
    n.n AS k,
    p.start_us
  FROM numbers AS n
  CROSS JOIN params AS p
  WHERE
    n.n >= CAST(FLOOR(p.route_count * 0.72) AS BIGINT)
    AND n.n < CAST(FLOOR(p.route_count * 0.76) AS BIGINT)
)
SELECT
  CAST(5 + l.k % 3 AS INT) AS database_id,
  'svc_' || LPAD(CAST(l.k AS STRING), 7, '0') AS name,
  'PipelineQueue' AS queue_name,
  CAST(TIMESTAMP_MICROS(l.start_us) AS TIMESTAMP_NTZ) AS create_date
FROM local_service AS l
UNION ALL
SELECT
  CAST(5 + (
    l.k + 1
  ) % 3 AS INT) AS database_id,
  'svc_' || LPAD(CAST(l.k AS STRING), 7, '0') AS name,
  'PipelineQueue' AS queue_name,
  CAST(TIMESTAMP_MICROS(l.start_us) AS TIMESTAMP_NTZ) AS create_date
FROM local_service AS l
WHERE
  l.k % 2 = 0

-- stage local_service (read 2x)
SELECT
  n.n AS k,
  p.start_us
FROM numbers AS n
CROSS JOIN params AS p
WHERE
  n.n >= CAST(FLOOR(p.route_count * 0.72) AS BIGINT)
  AND n.n < CAST(FLOOR(p.route_count * 0.76) AS BIGINT)

-- final query
SELECT
  CAST(5 + l.k % 3 AS INT) AS database_id,
  'svc_' || LPAD(CAST(l.k AS STRING), 7, '0') AS name,
  'PipelineQueue' AS queue_name,
  CAST(TIMESTAMP_MICROS(l.start_us) AS TIMESTAMP_NTZ) AS create_date
FROM local_service AS l
UNION ALL
SELECT
  CAST(5 + (
    l.k + 1
  ) % 3 AS INT) AS database_id,
  'svc_' || LPAD(CAST(l.k AS STRING), 7, '0') AS name,
  'PipelineQueue' AS queue_name,
  CAST(TIMESTAMP_MICROS(l.start_us) AS TIMESTAMP_NTZ) AS create_date
FROM local_service AS l
WHERE
  l.k % 2 = 0
