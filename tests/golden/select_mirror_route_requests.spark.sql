SELECT
  q.database_id,
  q.service_name
FROM route_requests AS q
WHERE
  (
    CAST(:database_ids AS ARRAY<INT>) IS NULL
    OR ARRAY_CONTAINS(CAST(:database_ids AS ARRAY<INT>), q.database_id)
  )
  AND (
    CAST(:service_names AS ARRAY<STRING>) IS NULL
    OR ARRAY_CONTAINS(CAST(:service_names AS ARRAY<STRING>), q.service_name)
  )
