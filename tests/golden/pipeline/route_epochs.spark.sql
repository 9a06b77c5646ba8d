-- as one query
WITH database_wide AS (
  SELECT DISTINCT
    r.database_id,
    r.lifetime
  FROM state_routes AS r
  WHERE
    NOT r.lifetime IS NULL
    AND (
      r.remote_service_name IS NULL
      OR r.remote_service_name = 'SQL/ServiceBroker/BrokerConfiguration'
    )
), own_expiry AS (
  SELECT DISTINCT
    r.database_id,
    r.remote_service_name AS service_name
  FROM state_routes AS r
  WHERE
    NOT r.lifetime IS NULL AND NOT r.remote_service_name IS NULL
), instant AS (
  SELECT
    d.database_id,
    CAST(NULL AS STRING) AS service_name,
    CAST('0001-01-01 00:00:00' AS TIMESTAMP_NTZ) AS routed_at
  FROM state_databases AS d
  UNION
  SELECT
    w.database_id,
    CAST(NULL AS STRING) AS service_name,
    w.lifetime AS routed_at
  FROM database_wide AS w
  UNION
  SELECT
    o.database_id,
    o.service_name,
    CAST('0001-01-01 00:00:00' AS TIMESTAMP_NTZ) AS routed_at
  FROM own_expiry AS o
  UNION
  SELECT
    r.database_id,
    r.remote_service_name AS service_name,
    r.lifetime AS routed_at
  FROM state_routes AS r
  WHERE
    NOT r.lifetime IS NULL AND NOT r.remote_service_name IS NULL
  UNION
  SELECT
    o.database_id,
    o.service_name,
    w.lifetime AS routed_at
  FROM own_expiry AS o
  JOIN database_wide AS w
    ON w.database_id = o.database_id
)
SELECT
  i.database_id,
  i.service_name,
  i.routed_at,
  LEAD(i.routed_at) OVER (PARTITION BY i.database_id, i.service_name ORDER BY i.routed_at NULLS LAST) AS epoch_end
FROM instant AS i

-- stage database_wide (read 2x)
SELECT DISTINCT
  r.database_id,
  r.lifetime
FROM state_routes AS r
WHERE
  NOT r.lifetime IS NULL
  AND (
    r.remote_service_name IS NULL
    OR r.remote_service_name = 'SQL/ServiceBroker/BrokerConfiguration'
  )

-- stage own_expiry (read 2x)
SELECT DISTINCT
  r.database_id,
  r.remote_service_name AS service_name
FROM state_routes AS r
WHERE
  NOT r.lifetime IS NULL AND NOT r.remote_service_name IS NULL

-- stage instant (read 1x)
SELECT
  d.database_id,
  CAST(NULL AS STRING) AS service_name,
  CAST('0001-01-01 00:00:00' AS TIMESTAMP_NTZ) AS routed_at
FROM state_databases AS d
UNION
SELECT
  w.database_id,
  CAST(NULL AS STRING) AS service_name,
  w.lifetime AS routed_at
FROM database_wide AS w
UNION
SELECT
  o.database_id,
  o.service_name,
  CAST('0001-01-01 00:00:00' AS TIMESTAMP_NTZ) AS routed_at
FROM own_expiry AS o
UNION
SELECT
  r.database_id,
  r.remote_service_name AS service_name,
  r.lifetime AS routed_at
FROM state_routes AS r
WHERE
  NOT r.lifetime IS NULL AND NOT r.remote_service_name IS NULL
UNION
SELECT
  o.database_id,
  o.service_name,
  w.lifetime AS routed_at
FROM own_expiry AS o
JOIN database_wide AS w
  ON w.database_id = o.database_id

-- final query
SELECT
  i.database_id,
  i.service_name,
  i.routed_at,
  LEAD(i.routed_at) OVER (PARTITION BY i.database_id, i.service_name ORDER BY i.routed_at NULLS LAST) AS epoch_end
FROM instant AS i
