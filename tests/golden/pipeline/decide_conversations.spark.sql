-- as one query
WITH keyed AS (
  SELECT
    c.conversation_id,
    k.key_id,
    k.in_class,
    k.broker_key,
    k.group_count,
    CASE
      WHEN k.option_count > 1
      THEN CAST(CONV(SUBSTRING(MD5(c.conversation_id), 1, 12), 16, 10) AS BIGINT)
      ELSE CAST(0 AS BIGINT)
    END AS draw
  FROM conversations AS c
  LEFT JOIN (
    /* the keys with their options' counts: one join per conversation */
    SELECT
      km.*,
      n.group_count,
      n.option_count
    FROM decision_keys AS km
    JOIN (
      SELECT DISTINCT
        o.key_id,
        o.group_count,
        o.option_count
      FROM key_options AS o
    ) AS n
      ON n.key_id = km.key_id
  ) AS k
    ON k.origin = c.origin
    AND k.service_name = c.service_name
    AND k.broker_key = COALESCE(LOWER(c.broker_instance), '')
    AND c.begin_time >= k.routed_at
    AND c.begin_time <= k.epoch_last
), grouped AS (
  SELECT
    d.*,
    d.draw % d.group_count AS group_rank,
    g.route_count
  FROM keyed AS d
  LEFT JOIN (
    SELECT DISTINCT
      o.key_id,
      o.group_rank,
      o.route_count
    FROM key_options AS o
  ) AS g
    ON g.key_id = d.key_id AND g.group_rank = d.draw % d.group_count
), routed AS (
  SELECT
    d.*,
    (
      d.draw DIV d.group_count
    ) % d.route_count AS route_rank,
    (
      d.draw DIV (
        d.group_count * d.route_count
      )
    ) % r.db_count AS db_rank
  FROM grouped AS d
  LEFT JOIN (
    SELECT DISTINCT
      o.key_id,
      o.group_rank,
      o.route_rank,
      o.db_count
    FROM key_options AS o
  ) AS r
    ON r.key_id = d.key_id
    AND r.group_rank = d.group_rank
    AND r.route_rank = (
      d.draw DIV d.group_count
    ) % d.route_count
)
SELECT
  d.conversation_id,
  o.outcome,
  o.route,
  o.address,
  o.mirror_address,
  o.`database`,
  CASE
    WHEN d.in_class AND d.broker_key <> ''
    THEN d.broker_key
    ELSE o.broker_instance
  END AS broker_instance,
  o.match_step,
  o.choose_step,
  o.locate_step,
  o.decided_by
FROM routed AS d
LEFT JOIN key_options AS o
  ON o.key_id = d.key_id
  AND o.group_rank = d.group_rank
  AND o.route_rank = d.route_rank
  AND o.db_rank = d.db_rank

-- stage keyed (read 1x)
SELECT
  c.conversation_id,
  k.key_id,
  k.in_class,
  k.broker_key,
  k.group_count,
  CASE
    WHEN k.option_count > 1
    THEN CAST(CONV(SUBSTRING(MD5(c.conversation_id), 1, 12), 16, 10) AS BIGINT)
    ELSE CAST(0 AS BIGINT)
  END AS draw
FROM conversations AS c
LEFT JOIN (
  /* the keys with their options' counts: one join per conversation */
  SELECT
    km.*,
    n.group_count,
    n.option_count
  FROM decision_keys AS km
  JOIN (
    SELECT DISTINCT
      o.key_id,
      o.group_count,
      o.option_count
    FROM key_options AS o
  ) AS n
    ON n.key_id = km.key_id
) AS k
  ON k.origin = c.origin
  AND k.service_name = c.service_name
  AND k.broker_key = COALESCE(LOWER(c.broker_instance), '')
  AND c.begin_time >= k.routed_at
  AND c.begin_time <= k.epoch_last

-- stage grouped (read 1x)
SELECT
  d.*,
  d.draw % d.group_count AS group_rank,
  g.route_count
FROM keyed AS d
LEFT JOIN (
  SELECT DISTINCT
    o.key_id,
    o.group_rank,
    o.route_count
  FROM key_options AS o
) AS g
  ON g.key_id = d.key_id AND g.group_rank = d.draw % d.group_count

-- stage routed (read 1x)
SELECT
  d.*,
  (
    d.draw DIV d.group_count
  ) % d.route_count AS route_rank,
  (
    d.draw DIV (
      d.group_count * d.route_count
    )
  ) % r.db_count AS db_rank
FROM grouped AS d
LEFT JOIN (
  SELECT DISTINCT
    o.key_id,
    o.group_rank,
    o.route_rank,
    o.db_count
  FROM key_options AS o
) AS r
  ON r.key_id = d.key_id
  AND r.group_rank = d.group_rank
  AND r.route_rank = (
    d.draw DIV d.group_count
  ) % d.route_count

-- final query
SELECT
  d.conversation_id,
  o.outcome,
  o.route,
  o.address,
  o.mirror_address,
  o.`database`,
  CASE
    WHEN d.in_class AND d.broker_key <> ''
    THEN d.broker_key
    ELSE o.broker_instance
  END AS broker_instance,
  o.match_step,
  o.choose_step,
  o.locate_step,
  o.decided_by
FROM routed AS d
LEFT JOIN key_options AS o
  ON o.key_id = d.key_id
  AND o.group_rank = d.group_rank
  AND o.route_rank = d.route_rank
  AND o.db_rank = d.db_rank
