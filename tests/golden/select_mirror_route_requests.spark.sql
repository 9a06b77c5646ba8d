SELECT
  d.name AS database_name,
  q.service_name
FROM route_requests AS q
JOIN databases AS d
  ON d.database_id = q.database_id
WHERE
  (
    CAST(:database_names AS ARRAY<STRING>) IS NULL
    OR ARRAY_CONTAINS(CAST(:database_names AS ARRAY<STRING>), d.name)
  )
  AND (
    CAST(:service_names AS ARRAY<STRING>) IS NULL
    OR ARRAY_CONTAINS(CAST(:service_names AS ARRAY<STRING>), q.service_name)
  )
