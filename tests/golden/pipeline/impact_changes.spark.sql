-- as one query
SELECT
  c.conversation_id,
  c.origin,
  c.service_name,
  LOWER(c.broker_instance) AS conversation_broker_instance,
  c.begin_time,
  b.outcome AS before_outcome,
  b.route AS before_route,
  b.address AS before_address,
  b.`database` AS before_database,
  b.decided_by AS before_decided_by,
  a.outcome AS after_outcome,
  a.route AS after_route,
  a.address AS after_address,
  a.`database` AS after_database,
  a.decided_by AS after_decided_by
FROM before AS b
JOIN after AS a
  ON a.conversation_id = b.conversation_id
JOIN conversations AS c
  ON c.conversation_id = b.conversation_id
WHERE
  b.outcome IS DISTINCT FROM a.outcome
  OR b.route IS DISTINCT FROM a.route
  OR b.address IS DISTINCT FROM a.address
  OR b.mirror_address IS DISTINCT FROM a.mirror_address
  OR b.`database` IS DISTINCT FROM a.`database`
  OR b.broker_instance IS DISTINCT FROM a.broker_instance

-- final query
SELECT
  c.conversation_id,
  c.origin,
  c.service_name,
  LOWER(c.broker_instance) AS conversation_broker_instance,
  c.begin_time,
  b.outcome AS before_outcome,
  b.route AS before_route,
  b.address AS before_address,
  b.`database` AS before_database,
  b.decided_by AS before_decided_by,
  a.outcome AS after_outcome,
  a.route AS after_route,
  a.address AS after_address,
  a.`database` AS after_database,
  a.decided_by AS after_decided_by
FROM before AS b
JOIN after AS a
  ON a.conversation_id = b.conversation_id
JOIN conversations AS c
  ON c.conversation_id = b.conversation_id
WHERE
  b.outcome IS DISTINCT FROM a.outcome
  OR b.route IS DISTINCT FROM a.route
  OR b.address IS DISTINCT FROM a.address
  OR b.mirror_address IS DISTINCT FROM a.mirror_address
  OR b.`database` IS DISTINCT FROM a.`database`
  OR b.broker_instance IS DISTINCT FROM a.broker_instance
