SELECT
  s.name,
  d.service_broker_guid,
  d.database_id,
  d.name AS database_name
FROM services AS s
JOIN databases AS d
  ON d.database_id = s.database_id
WHERE
  CAST(:service_names AS ARRAY<STRING>) IS NULL
  OR ARRAY_CONTAINS(CAST(:service_names AS ARRAY<STRING>), s.name)
