-- as one query
WITH routed AS (
  SELECT
    c.*,
    d.database_id AS routing_database_id
  FROM conversations AS c
  JOIN state_databases AS d
    ON d.name = CASE WHEN c.origin = 'outside' THEN 'msdb' ELSE c.origin END
  WHERE
    NOT c.begin_time IS NULL
), own_expiry AS (
  SELECT DISTINCT
    e.database_id,
    e.service_name
  FROM epochs AS e
  WHERE
    NOT e.service_name IS NULL
)
SELECT
  c.conversation_id,
  c.origin,
  c.service_name,
  LOWER(c.broker_instance) AS broker_instance,
  e.routed_at
FROM routed AS c
JOIN epochs AS e
  ON e.database_id = c.routing_database_id AND e.service_name = c.service_name
WHERE
  c.begin_time >= e.routed_at
  AND (
    e.epoch_end IS NULL OR c.begin_time < e.epoch_end
  )
UNION ALL
SELECT
  c.conversation_id,
  c.origin,
  c.service_name,
  LOWER(c.broker_instance) AS broker_instance,
  e.routed_at
FROM routed AS c
LEFT JOIN own_expiry AS o
  ON o.database_id = c.routing_database_id AND o.service_name = c.service_name
JOIN epochs AS e
  ON e.database_id = c.routing_database_id AND e.service_name IS NULL
WHERE
  o.database_id IS NULL
  AND c.begin_time >= e.routed_at
  AND (
    e.epoch_end IS NULL OR c.begin_time < e.epoch_end
  )
UNION ALL
SELECT
  c.conversation_id,
  c.origin,
  c.service_name,
  LOWER(c.broker_instance) AS broker_instance,
  CAST(NULL AS TIMESTAMP_NTZ) AS routed_at
FROM conversations AS c
LEFT JOIN state_databases AS d
  ON d.name = CASE WHEN c.origin = 'outside' THEN 'msdb' ELSE c.origin END
WHERE
  d.database_id IS NULL OR c.begin_time IS NULL

-- stage routed (read 2x)
SELECT
  c.*,
  d.database_id AS routing_database_id
FROM conversations AS c
JOIN state_databases AS d
  ON d.name = CASE WHEN c.origin = 'outside' THEN 'msdb' ELSE c.origin END
WHERE
  NOT c.begin_time IS NULL

-- stage own_expiry (read 1x)
SELECT DISTINCT
  e.database_id,
  e.service_name
FROM epochs AS e
WHERE
  NOT e.service_name IS NULL

-- final query
SELECT
  c.conversation_id,
  c.origin,
  c.service_name,
  LOWER(c.broker_instance) AS broker_instance,
  e.routed_at
FROM routed AS c
JOIN epochs AS e
  ON e.database_id = c.routing_database_id AND e.service_name = c.service_name
WHERE
  c.begin_time >= e.routed_at
  AND (
    e.epoch_end IS NULL OR c.begin_time < e.epoch_end
  )
UNION ALL
SELECT
  c.conversation_id,
  c.origin,
  c.service_name,
  LOWER(c.broker_instance) AS broker_instance,
  e.routed_at
FROM routed AS c
LEFT JOIN own_expiry AS o
  ON o.database_id = c.routing_database_id AND o.service_name = c.service_name
JOIN epochs AS e
  ON e.database_id = c.routing_database_id AND e.service_name IS NULL
WHERE
  o.database_id IS NULL
  AND c.begin_time >= e.routed_at
  AND (
    e.epoch_end IS NULL OR c.begin_time < e.epoch_end
  )
UNION ALL
SELECT
  c.conversation_id,
  c.origin,
  c.service_name,
  LOWER(c.broker_instance) AS broker_instance,
  CAST(NULL AS TIMESTAMP_NTZ) AS routed_at
FROM conversations AS c
LEFT JOIN state_databases AS d
  ON d.name = CASE WHEN c.origin = 'outside' THEN 'msdb' ELSE c.origin END
WHERE
  d.database_id IS NULL OR c.begin_time IS NULL
