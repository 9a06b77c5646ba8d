-- as one query
SELECT
  t.conversation_handle AS conversation_id,
  MIN(d.name) AS origin,
  MIN(t.to_service_name) AS service_name,
  MIN(t.to_broker_instance) AS broker_instance,
  MIN(t.enqueue_time) AS begin_time
FROM tq AS t
JOIN db AS d
  ON d.database_id = t.database_id
GROUP BY
  t.conversation_handle

-- final query
SELECT
  t.conversation_handle AS conversation_id,
  MIN(d.name) AS origin,
  MIN(t.to_service_name) AS service_name,
  MIN(t.to_broker_instance) AS broker_instance,
  MIN(t.enqueue_time) AS begin_time
FROM tq AS t
JOIN db AS d
  ON d.database_id = t.database_id
GROUP BY
  t.conversation_handle
