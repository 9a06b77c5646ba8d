-- as one query
WITH keyed AS (
  SELECT /*+ BROADCAST(k) */
    c.conversation_id,
    k.key_id,
    k.in_class,
    k.broker_key,
    k.group_count,
    k.route_count,
    k.db_count,
    CASE
      WHEN k.option_count > 1
      THEN CAST(CONV(SUBSTRING(MD5(c.conversation_id), 1, 12), 16, 10) AS BIGINT)
      ELSE CAST(0 AS BIGINT)
    END AS draw
  FROM conversations AS c
  LEFT JOIN (
    /* The keys with their options' counts. route_count (db_count) is given when every */
    /* pick group (route) of the key has the same one, as nearly every key has: then */
    /* the ranks follow from the draw and the key alone. */
    SELECT
      km.*,
      n.group_count,
      n.option_count,
      CASE WHEN n.min_route_count = n.max_route_count THEN n.max_route_count END AS route_count,
      CASE WHEN n.min_db_count = n.max_db_count THEN n.max_db_count END AS db_count
    FROM decision_keys AS km
    JOIN (
      SELECT
        o.key_id,
        MAX(o.group_count) AS group_count,
        MAX(o.option_count) AS option_count,
        MIN(o.route_count) AS min_route_count,
        MAX(o.route_count) AS max_route_count,
        MIN(o.db_count) AS min_db_count,
        MAX(o.db_count) AS max_db_count
      FROM key_options AS o
      GROUP BY
        o.key_id
    ) AS n
      ON n.key_id = km.key_id
  ) AS k
    ON k.key_hash = XXHASH64(c.origin, c.service_name, COALESCE(LOWER(c.broker_instance), ''))
    AND NOT k.service_name IS NULL
    AND c.begin_time >= k.routed_at
    AND c.begin_time <= k.epoch_last
), grouped AS (
  /* The route count of the picked group, looked up only for keys whose groups differ. */
  SELECT /*+ BROADCAST(g) */
    d.conversation_id,
    d.key_id,
    d.in_class,
    d.broker_key,
    d.draw,
    d.group_count,
    d.db_count,
    d.draw % d.group_count AS group_rank,
    COALESCE(d.route_count, g.route_count) AS route_count
  FROM keyed AS d
  LEFT JOIN (
    SELECT DISTINCT
      o.key_id,
      o.group_rank,
      o.route_count
    FROM key_options AS o
    WHERE
      o.key_id IN (
        SELECT
          u.key_id
        FROM key_options AS u
        GROUP BY
          u.key_id
        HAVING
          MIN(u.route_count) <> MAX(u.route_count)
      )
  ) AS g
    ON g.key_id = d.key_id AND g.group_rank = d.draw % d.group_count
), routed AS (
  /* The database count of the picked route, looked up only for keys whose routes differ. */
  SELECT /*+ BROADCAST(r) */
    d.conversation_id,
    d.key_id,
    d.in_class,
    d.broker_key,
    d.group_rank,
    (
      d.draw DIV d.group_count
    ) % d.route_count AS route_rank,
    (
      d.draw DIV (
        d.group_count * d.route_count
      )
    ) % COALESCE(d.db_count, r.db_count) AS db_rank
  FROM grouped AS d
  LEFT JOIN (
    SELECT DISTINCT
      o.key_id,
      o.group_rank,
      o.route_rank,
      o.db_count
    FROM key_options AS o
    WHERE
      o.key_id IN (
        SELECT
          u.key_id
        FROM key_options AS u
        GROUP BY
          u.key_id
        HAVING
          MIN(u.db_count) <> MAX(u.db_count)
      )
  ) AS r
    ON r.key_id = d.key_id
    AND r.group_rank = d.group_rank
    AND r.route_rank = (
      d.draw DIV d.group_count
    ) % d.route_count
)
SELECT /*+ BROADCAST(o) */
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
SELECT /*+ BROADCAST(k) */
  c.conversation_id,
  k.key_id,
  k.in_class,
  k.broker_key,
  k.group_count,
  k.route_count,
  k.db_count,
  CASE
    WHEN k.option_count > 1
    THEN CAST(CONV(SUBSTRING(MD5(c.conversation_id), 1, 12), 16, 10) AS BIGINT)
    ELSE CAST(0 AS BIGINT)
  END AS draw
FROM conversations AS c
LEFT JOIN (
  /* The keys with their options' counts. route_count (db_count) is given when every */
  /* pick group (route) of the key has the same one, as nearly every key has: then */
  /* the ranks follow from the draw and the key alone. */
  SELECT
    km.*,
    n.group_count,
    n.option_count,
    CASE WHEN n.min_route_count = n.max_route_count THEN n.max_route_count END AS route_count,
    CASE WHEN n.min_db_count = n.max_db_count THEN n.max_db_count END AS db_count
  FROM decision_keys AS km
  JOIN (
    SELECT
      o.key_id,
      MAX(o.group_count) AS group_count,
      MAX(o.option_count) AS option_count,
      MIN(o.route_count) AS min_route_count,
      MAX(o.route_count) AS max_route_count,
      MIN(o.db_count) AS min_db_count,
      MAX(o.db_count) AS max_db_count
    FROM key_options AS o
    GROUP BY
      o.key_id
  ) AS n
    ON n.key_id = km.key_id
) AS k
  ON k.key_hash = XXHASH64(c.origin, c.service_name, COALESCE(LOWER(c.broker_instance), ''))
  AND NOT k.service_name IS NULL
  AND c.begin_time >= k.routed_at
  AND c.begin_time <= k.epoch_last

-- stage grouped (read 1x)
/* The route count of the picked group, looked up only for keys whose groups differ. */
SELECT /*+ BROADCAST(g) */
  d.conversation_id,
  d.key_id,
  d.in_class,
  d.broker_key,
  d.draw,
  d.group_count,
  d.db_count,
  d.draw % d.group_count AS group_rank,
  COALESCE(d.route_count, g.route_count) AS route_count
FROM keyed AS d
LEFT JOIN (
  SELECT DISTINCT
    o.key_id,
    o.group_rank,
    o.route_count
  FROM key_options AS o
  WHERE
    o.key_id IN (
      SELECT
        u.key_id
      FROM key_options AS u
      GROUP BY
        u.key_id
      HAVING
        MIN(u.route_count) <> MAX(u.route_count)
    )
) AS g
  ON g.key_id = d.key_id AND g.group_rank = d.draw % d.group_count

-- stage routed (read 1x)
/* The database count of the picked route, looked up only for keys whose routes differ. */
SELECT /*+ BROADCAST(r) */
  d.conversation_id,
  d.key_id,
  d.in_class,
  d.broker_key,
  d.group_rank,
  (
    d.draw DIV d.group_count
  ) % d.route_count AS route_rank,
  (
    d.draw DIV (
      d.group_count * d.route_count
    )
  ) % COALESCE(d.db_count, r.db_count) AS db_rank
FROM grouped AS d
LEFT JOIN (
  SELECT DISTINCT
    o.key_id,
    o.group_rank,
    o.route_rank,
    o.db_count
  FROM key_options AS o
  WHERE
    o.key_id IN (
      SELECT
        u.key_id
      FROM key_options AS u
      GROUP BY
        u.key_id
      HAVING
        MIN(u.db_count) <> MAX(u.db_count)
    )
) AS r
  ON r.key_id = d.key_id
  AND r.group_rank = d.group_rank
  AND r.route_rank = (
    d.draw DIV d.group_count
  ) % d.route_count

-- final query
SELECT /*+ BROADCAST(o) */
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
