SELECT
  d.name AS database_name,
  r.remote_service_name AS service_name,
  r.name,
  r.broker_instance,
  r.address,
  r.mirror_address,
  r.lifetime
FROM routes AS r
JOIN databases AS d
  ON d.database_id = r.database_id
WHERE
  (
    CAST(:database_names AS ARRAY<STRING>) IS NULL
    OR ARRAY_CONTAINS(CAST(:database_names AS ARRAY<STRING>), d.name)
  )
  AND (
    CAST(:service_names AS ARRAY<STRING>) IS NULL
    OR ARRAY_CONTAINS(CAST(:service_names AS ARRAY<STRING>), r.remote_service_name)
    OR (
      CAST(:wildcards AS BOOLEAN) AND r.remote_service_name IS NULL
    )
  )
