-- as one query
WITH clock AS (
  SELECT
    COALESCE(MAX(a.as_of), (
      SELECT
        MAX(q.enqueue_time)
      FROM tq AS q
    )) AS as_of
  FROM as_of AS a
)
SELECT
  d.name AS database_name,
  t.to_service_name AS service_name,
  r.route,
  t.transmission_status,
  COUNT(*) AS messages,
  COUNT(DISTINCT t.conversation_handle) AS conversations,
  MIN(t.enqueue_time) AS oldest_enqueue_time,
  MAX(
    CAST(FLOOR(UNIX_TIMESTAMP(c.as_of)) AS BIGINT) - CAST(FLOOR(UNIX_TIMESTAMP(t.enqueue_time)) AS BIGINT)
  ) AS max_waited_seconds
FROM tq AS t
JOIN db AS d
  ON d.database_id = t.database_id
CROSS JOIN clock AS c
LEFT JOIN decisions AS r
  ON r.conversation_id = t.conversation_handle
WHERE
  COALESCE(t.transmission_status, '') <> ''
GROUP BY
  d.name,
  t.to_service_name,
  r.route,
  t.transmission_status

-- stage clock (read 1x)
SELECT
  COALESCE(MAX(a.as_of), (
    SELECT
      MAX(q.enqueue_time)
    FROM tq AS q
  )) AS as_of
FROM as_of AS a

-- final query
SELECT
  d.name AS database_name,
  t.to_service_name AS service_name,
  r.route,
  t.transmission_status,
  COUNT(*) AS messages,
  COUNT(DISTINCT t.conversation_handle) AS conversations,
  MIN(t.enqueue_time) AS oldest_enqueue_time,
  MAX(
    CAST(FLOOR(UNIX_TIMESTAMP(c.as_of)) AS BIGINT) - CAST(FLOOR(UNIX_TIMESTAMP(t.enqueue_time)) AS BIGINT)
  ) AS max_waited_seconds
FROM tq AS t
JOIN db AS d
  ON d.database_id = t.database_id
CROSS JOIN clock AS c
LEFT JOIN decisions AS r
  ON r.conversation_id = t.conversation_handle
WHERE
  COALESCE(t.transmission_status, '') <> ''
GROUP BY
  d.name,
  t.to_service_name,
  r.route,
  t.transmission_status
