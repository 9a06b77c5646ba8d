WITH routing_database AS (
  SELECT
    d.database_id
  FROM databases AS d
  WHERE
    d.name = CASE
      WHEN CAST(:origin AS STRING) = 'outside'
      THEN 'msdb'
      ELSE CAST(:origin AS STRING)
    END
)
SELECT
  'route' AS kind,
  r.name,
  r.remote_service_name AS service_name,
  r.broker_instance,
  r.address,
  r.mirror_address,
  CAST(NULL AS INT) AS database_id,
  CAST(NULL AS STRING) AS database_name,
  CAST(NULL AS BOOLEAN) AS is_forwarding_enabled
FROM routes AS r
JOIN routing_database AS k
  ON k.database_id = r.database_id
WHERE
  (
    r.lifetime IS NULL OR r.lifetime > CAST(:routed_at AS TIMESTAMP_NTZ)
  )
  AND (
    r.remote_service_name IS NULL
    OR r.remote_service_name = CAST(:service_name AS STRING)
    OR r.remote_service_name = 'SQL/ServiceBroker/BrokerConfiguration'
  )
UNION ALL
SELECT
  'request' AS kind,
  NULL,
  q.service_name,
  NULL,
  NULL,
  NULL,
  NULL,
  NULL,
  NULL
FROM route_requests AS q
JOIN routing_database AS k
  ON k.database_id = q.database_id
WHERE
  q.service_name = CAST(:service_name AS STRING)
UNION ALL
SELECT
  'service' AS kind,
  NULL,
  s.name,
  d.service_broker_guid,
  NULL,
  NULL,
  d.database_id,
  d.name,
  NULL
FROM services AS s
JOIN databases AS d
  ON d.database_id = s.database_id
WHERE
  s.name = CAST(:service_name AS STRING)
UNION ALL
SELECT
  'origin' AS kind,
  NULL,
  NULL,
  NULL,
  NULL,
  NULL,
  d.database_id,
  d.name,
  NULL
FROM databases AS d
WHERE
  d.name = CAST(:origin AS STRING) AND CAST(:origin AS STRING) <> 'outside'
UNION ALL
SELECT
  'forwarding' AS kind,
  NULL,
  NULL,
  NULL,
  NULL,
  NULL,
  NULL,
  NULL,
  BOOL_OR(f.is_forwarding_enabled)
FROM instance_settings AS f
