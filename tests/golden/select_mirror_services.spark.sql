SELECT
  s.name,
  s.database_id
FROM services AS s
WHERE
  CAST(:service_names AS ARRAY<STRING>) IS NULL
  OR ARRAY_CONTAINS(CAST(:service_names AS ARRAY<STRING>), s.name)
