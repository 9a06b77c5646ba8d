-- as one query
SELECT
  d.name AS database_name,
  e.service_name,
  e.far_service,
  e.state,
  COUNT(*) AS endpoints,
  SUM(CASE WHEN e.is_initiator THEN 1 ELSE 0 END) AS initiated_here
FROM endpoints AS e
JOIN db AS d
  ON d.database_id = e.database_id
GROUP BY
  d.name,
  e.service_name,
  e.far_service,
  e.state

-- final query
SELECT
  d.name AS database_name,
  e.service_name,
  e.far_service,
  e.state,
  COUNT(*) AS endpoints,
  SUM(CASE WHEN e.is_initiator THEN 1 ELSE 0 END) AS initiated_here
FROM endpoints AS e
JOIN db AS d
  ON d.database_id = e.database_id
GROUP BY
  d.name,
  e.service_name,
  e.far_service,
  e.state
