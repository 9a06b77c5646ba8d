-- as one query
SELECT
  c.conversation_id,
  c.origin,
  c.service_name,
  LOWER(c.broker_instance) AS broker_instance,
  e.routed_at
FROM conversations AS c
LEFT JOIN epochs AS e
  ON c.begin_time >= e.routed_at
  AND (
    e.epoch_end IS NULL OR c.begin_time < e.epoch_end
  )

-- final query
SELECT
  c.conversation_id,
  c.origin,
  c.service_name,
  LOWER(c.broker_instance) AS broker_instance,
  e.routed_at
FROM conversations AS c
LEFT JOIN epochs AS e
  ON c.begin_time >= e.routed_at
  AND (
    e.epoch_end IS NULL OR c.begin_time < e.epoch_end
  )
