SELECT
  r.database_id,
  r.remote_service_name AS service_name,
  r.name,
  r.broker_instance,
  r.address,
  r.mirror_address,
  r.lifetime
FROM routes AS r
WHERE
  (
    CAST(:database_ids AS ARRAY<INT>) IS NULL
    OR ARRAY_CONTAINS(CAST(:database_ids AS ARRAY<INT>), r.database_id)
  )
  AND (
    CAST(:service_names AS ARRAY<STRING>) IS NULL
    OR ARRAY_CONTAINS(CAST(:service_names AS ARRAY<STRING>), r.remote_service_name)
    OR (
      CAST(:wildcards AS BOOLEAN) AND r.remote_service_name IS NULL
    )
  )
