-- as one query
WITH conversation_group AS (
  SELECT
    c.origin,
    c.service_name,
    COALESCE(LOWER(c.broker_instance), '') AS broker_key,
    MIN(c.begin_time) AS first_begin,
    MAX(c.begin_time) AS last_begin
  FROM conversations AS c
  WHERE
    NOT c.begin_time IS NULL
  GROUP BY
    c.origin,
    c.service_name,
    COALESCE(LOWER(c.broker_instance), '')
), routed_group AS (
  SELECT
    g.*,
    d.database_id AS routing_database_id
  FROM conversation_group AS g
  JOIN state_databases AS d
    ON d.name = CASE WHEN g.origin = 'outside' THEN 'msdb' ELSE g.origin END
), own_expiry AS (
  SELECT DISTINCT
    e.database_id,
    e.service_name
  FROM epochs AS e
  WHERE
    NOT e.service_name IS NULL
), group_epoch AS (
  /* A service with expiring routes of its own has its own epochs, any other the */
  /* database-wide ones (two plain joins: an outer join with range conditions becomes a */
  /* nested-loop join in DuckDB). */
  SELECT
    g.origin,
    g.service_name,
    g.broker_key,
    g.routing_database_id,
    e.routed_at,
    e.epoch_end
  FROM routed_group AS g
  JOIN epochs AS e
    ON e.database_id = g.routing_database_id AND e.service_name = g.service_name
  WHERE
    e.routed_at <= g.last_begin
    AND (
      e.epoch_end IS NULL OR e.epoch_end > g.first_begin
    )
  UNION ALL
  SELECT
    g.origin,
    g.service_name,
    g.broker_key,
    g.routing_database_id,
    e.routed_at,
    e.epoch_end
  FROM routed_group AS g
  LEFT JOIN own_expiry AS o
    ON o.database_id = g.routing_database_id AND o.service_name = g.service_name
  JOIN epochs AS e
    ON e.database_id = g.routing_database_id AND e.service_name IS NULL
  WHERE
    o.database_id IS NULL
    AND e.routed_at <= g.last_begin
    AND (
      e.epoch_end IS NULL OR e.epoch_end > g.first_begin
    )
), named_service AS (
  /* Services the routing database's own routes or route requests name (R2.1-R2.4). */
  SELECT
    r.database_id,
    r.remote_service_name AS service_name
  FROM state_routes AS r
  WHERE
    NOT r.remote_service_name IS NULL
  UNION
  SELECT
    q.database_id,
    q.service_name
  FROM state_route_requests AS q
), existing_service AS (
  /* Services of the instance (R2.6, R4 locate them in any database). */
  SELECT DISTINCT
    s.name AS service_name
  FROM state_services AS s
), classified AS (
  SELECT
    k.*,
    n.service_name IS NULL
    AND x.service_name IS NULL
    AND REGEXP_EXTRACT(k.service_name, '^([tT][cC][pP]://[^/:]+:[0-9]+)') = '' AS in_class
  FROM group_epoch AS k
  LEFT JOIN named_service AS n
    ON n.database_id = k.routing_database_id AND n.service_name = k.service_name
  LEFT JOIN existing_service AS x
    ON x.service_name = k.service_name
), decided AS (
  SELECT
    k.origin,
    k.service_name,
    k.broker_key,
    k.routed_at,
    k.epoch_end,
    k.in_class,
    CASE
      WHEN k.in_class
      THEN MIN(k.service_name) OVER (PARTITION BY k.origin, k.routed_at, k.in_class, k.broker_key = '')
      ELSE k.service_name
    END AS decided_service_name,
    CASE
      WHEN k.in_class
      THEN MIN(k.broker_key) OVER (PARTITION BY k.origin, k.routed_at, k.in_class, k.broker_key = '')
      ELSE k.broker_key
    END AS decided_broker_key
  FROM classified AS k
)
SELECT
  d.origin,
  d.service_name,
  d.broker_key,
  d.routed_at,
  COALESCE(
    d.epoch_end - INTERVAL '1' MICROSECOND,
    CAST('9999-12-31 23:59:59.999999' AS TIMESTAMP_NTZ)
  ) AS epoch_last,
  d.in_class,
  d.decided_service_name,
  d.decided_broker_key,
  DENSE_RANK() OVER (
    ORDER BY d.origin NULLS LAST, d.decided_service_name NULLS LAST, d.decided_broker_key NULLS LAST, d.routed_at NULLS LAST
  ) AS key_id
FROM decided AS d

-- stage conversation_group (read 1x)
SELECT
  c.origin,
  c.service_name,
  COALESCE(LOWER(c.broker_instance), '') AS broker_key,
  MIN(c.begin_time) AS first_begin,
  MAX(c.begin_time) AS last_begin
FROM conversations AS c
WHERE
  NOT c.begin_time IS NULL
GROUP BY
  c.origin,
  c.service_name,
  COALESCE(LOWER(c.broker_instance), '')

-- stage routed_group (read 2x)
SELECT
  g.*,
  d.database_id AS routing_database_id
FROM conversation_group AS g
JOIN state_databases AS d
  ON d.name = CASE WHEN g.origin = 'outside' THEN 'msdb' ELSE g.origin END

-- stage own_expiry (read 1x)
SELECT DISTINCT
  e.database_id,
  e.service_name
FROM epochs AS e
WHERE
  NOT e.service_name IS NULL

-- stage group_epoch (read 1x)
/* A service with expiring routes of its own has its own epochs, any other the */
/* database-wide ones (two plain joins: an outer join with range conditions becomes a */
/* nested-loop join in DuckDB). */
SELECT
  g.origin,
  g.service_name,
  g.broker_key,
  g.routing_database_id,
  e.routed_at,
  e.epoch_end
FROM routed_group AS g
JOIN epochs AS e
  ON e.database_id = g.routing_database_id AND e.service_name = g.service_name
WHERE
  e.routed_at <= g.last_begin
  AND (
    e.epoch_end IS NULL OR e.epoch_end > g.first_begin
  )
UNION ALL
SELECT
  g.origin,
  g.service_name,
  g.broker_key,
  g.routing_database_id,
  e.routed_at,
  e.epoch_end
FROM routed_group AS g
LEFT JOIN own_expiry AS o
  ON o.database_id = g.routing_database_id AND o.service_name = g.service_name
JOIN epochs AS e
  ON e.database_id = g.routing_database_id AND e.service_name IS NULL
WHERE
  o.database_id IS NULL
  AND e.routed_at <= g.last_begin
  AND (
    e.epoch_end IS NULL OR e.epoch_end > g.first_begin
  )

-- stage named_service (read 1x)
/* Services the routing database's own routes or route requests name (R2.1-R2.4). */
SELECT
  r.database_id,
  r.remote_service_name AS service_name
FROM state_routes AS r
WHERE
  NOT r.remote_service_name IS NULL
UNION
SELECT
  q.database_id,
  q.service_name
FROM state_route_requests AS q

-- stage existing_service (read 1x)
/* Services of the instance (R2.6, R4 locate them in any database). */
SELECT DISTINCT
  s.name AS service_name
FROM state_services AS s

-- stage classified (read 1x)
SELECT
  k.*,
  n.service_name IS NULL
  AND x.service_name IS NULL
  AND REGEXP_EXTRACT(k.service_name, '^([tT][cC][pP]://[^/:]+:[0-9]+)') = '' AS in_class
FROM group_epoch AS k
LEFT JOIN named_service AS n
  ON n.database_id = k.routing_database_id AND n.service_name = k.service_name
LEFT JOIN existing_service AS x
  ON x.service_name = k.service_name

-- stage decided (read 1x)
SELECT
  k.origin,
  k.service_name,
  k.broker_key,
  k.routed_at,
  k.epoch_end,
  k.in_class,
  CASE
    WHEN k.in_class
    THEN MIN(k.service_name) OVER (PARTITION BY k.origin, k.routed_at, k.in_class, k.broker_key = '')
    ELSE k.service_name
  END AS decided_service_name,
  CASE
    WHEN k.in_class
    THEN MIN(k.broker_key) OVER (PARTITION BY k.origin, k.routed_at, k.in_class, k.broker_key = '')
    ELSE k.broker_key
  END AS decided_broker_key
FROM classified AS k

-- final query
SELECT
  d.origin,
  d.service_name,
  d.broker_key,
  d.routed_at,
  COALESCE(
    d.epoch_end - INTERVAL '1' MICROSECOND,
    CAST('9999-12-31 23:59:59.999999' AS TIMESTAMP_NTZ)
  ) AS epoch_last,
  d.in_class,
  d.decided_service_name,
  d.decided_broker_key,
  DENSE_RANK() OVER (
    ORDER BY d.origin NULLS LAST, d.decided_service_name NULLS LAST, d.decided_broker_key NULLS LAST, d.routed_at NULLS LAST
  ) AS key_id
FROM decided AS d
