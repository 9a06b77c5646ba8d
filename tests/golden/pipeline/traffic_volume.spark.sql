-- as one query
SELECT
  d.name AS database_name,
  t.to_service_name AS service_name,
  r.route,
  r.outcome,
  DATE_TRUNC('HOUR', t.enqueue_time) AS hour,
  COUNT(*) AS messages,
  COUNT(DISTINCT t.conversation_handle) AS conversations,
  SUM(COALESCE(OCTET_LENGTH(t.message_body), 0)) AS body_bytes,
  SUM(CASE WHEN COALESCE(t.transmission_status, '') <> '' THEN 1 ELSE 0 END) AS messages_held
FROM tq AS t
JOIN db AS d
  ON d.database_id = t.database_id
LEFT JOIN decisions AS r
  ON r.conversation_id = t.conversation_handle
GROUP BY
  d.name,
  t.to_service_name,
  r.route,
  r.outcome,
  DATE_TRUNC('HOUR', t.enqueue_time)

-- final query
SELECT
  d.name AS database_name,
  t.to_service_name AS service_name,
  r.route,
  r.outcome,
  DATE_TRUNC('HOUR', t.enqueue_time) AS hour,
  COUNT(*) AS messages,
  COUNT(DISTINCT t.conversation_handle) AS conversations,
  SUM(COALESCE(OCTET_LENGTH(t.message_body), 0)) AS body_bytes,
  SUM(CASE WHEN COALESCE(t.transmission_status, '') <> '' THEN 1 ELSE 0 END) AS messages_held
FROM tq AS t
JOIN db AS d
  ON d.database_id = t.database_id
LEFT JOIN decisions AS r
  ON r.conversation_id = t.conversation_handle
GROUP BY
  d.name,
  t.to_service_name,
  r.route,
  r.outcome,
  DATE_TRUNC('HOUR', t.enqueue_time)
