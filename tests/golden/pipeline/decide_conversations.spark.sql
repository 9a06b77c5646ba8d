-- as one query
WITH conversation_draw AS (
  SELECT
    h.conversation_id,
    h.origin,
    h.service_name,
    h.broker_instance,
    h.routed_at,
    (
      CAST(LOCATE(SUBSTRING(h.digest, 1, 1), '0123456789abcdef') - 1 AS BIGINT) * 17592186044416 + CAST(LOCATE(SUBSTRING(h.digest, 2, 1), '0123456789abcdef') - 1 AS BIGINT) * 1099511627776 + CAST(LOCATE(SUBSTRING(h.digest, 3, 1), '0123456789abcdef') - 1 AS BIGINT) * 68719476736 + CAST(LOCATE(SUBSTRING(h.digest, 4, 1), '0123456789abcdef') - 1 AS BIGINT) * 4294967296 + CAST(LOCATE(SUBSTRING(h.digest, 5, 1), '0123456789abcdef') - 1 AS BIGINT) * 268435456 + CAST(LOCATE(SUBSTRING(h.digest, 6, 1), '0123456789abcdef') - 1 AS BIGINT) * 16777216 + CAST(LOCATE(SUBSTRING(h.digest, 7, 1), '0123456789abcdef') - 1 AS BIGINT) * 1048576 + CAST(LOCATE(SUBSTRING(h.digest, 8, 1), '0123456789abcdef') - 1 AS BIGINT) * 65536 + CAST(LOCATE(SUBSTRING(h.digest, 9, 1), '0123456789abcdef') - 1 AS BIGINT) * 4096 + CAST(LOCATE(SUBSTRING(h.digest, 10, 1), '0123456789abcdef') - 1 AS BIGINT) * 256 + CAST(LOCATE(SUBSTRING(h.digest, 11, 1), '0123456789abcdef') - 1 AS BIGINT) * 16 + CAST(LOCATE(SUBSTRING(h.digest, 12, 1), '0123456789abcdef') - 1 AS BIGINT) * 1
    ) AS draw
  FROM (
    SELECT
      k.*,
      MD5(k.conversation_id) AS digest
    FROM conversation_keys AS k
  ) AS h
)
SELECT
  d.conversation_id,
  o.outcome,
  o.route,
  o.address,
  o.mirror_address,
  o.`database`,
  o.broker_instance,
  o.match_step,
  o.choose_step,
  o.locate_step,
  o.decided_by
FROM conversation_draw AS d
JOIN key_options AS o
  ON o.origin = d.origin
  AND o.service_name = d.service_name
  AND o.broker_key = COALESCE(d.broker_instance, '')
  AND o.routed_at = d.routed_at
WHERE
  o.group_rank = d.draw % o.group_count
  AND o.route_rank = (
    d.draw DIV o.group_count
  ) % o.route_count
  AND o.db_rank = (
    d.draw DIV (
      o.group_count * o.route_count
    )
  ) % o.db_count
UNION ALL
/* Conversations with no decision (origin not a database of the instance, or no */
/* begin_time): a plain inner join above, and this anti join, keep both joins hash joins */
/* (a LEFT JOIN with the pick conditions becomes a nested-loop join in DuckDB). */
SELECT
  c.conversation_id,
  CAST(NULL AS STRING) AS outcome,
  CAST(NULL AS STRING) AS route,
  CAST(NULL AS STRING) AS address,
  CAST(NULL AS STRING) AS mirror_address,
  CAST(NULL AS STRING) AS `database`,
  CAST(NULL AS STRING) AS broker_instance,
  CAST(NULL AS STRING) AS match_step,
  CAST(NULL AS STRING) AS choose_step,
  CAST(NULL AS STRING) AS locate_step,
  CAST(NULL AS STRING) AS decided_by
FROM conversation_keys AS c
LEFT JOIN (
  SELECT DISTINCT
    ko.origin,
    ko.service_name,
    ko.broker_key,
    ko.routed_at
  FROM key_options AS ko
) AS k
  ON k.origin = c.origin
  AND k.service_name = c.service_name
  AND k.broker_key = COALESCE(c.broker_instance, '')
  AND k.routed_at = c.routed_at
WHERE
  k.origin IS NULL

-- stage conversation_draw (read 1x)
SELECT
  h.conversation_id,
  h.origin,
  h.service_name,
  h.broker_instance,
  h.routed_at,
  (
    CAST(LOCATE(SUBSTRING(h.digest, 1, 1), '0123456789abcdef') - 1 AS BIGINT) * 17592186044416 + CAST(LOCATE(SUBSTRING(h.digest, 2, 1), '0123456789abcdef') - 1 AS BIGINT) * 1099511627776 + CAST(LOCATE(SUBSTRING(h.digest, 3, 1), '0123456789abcdef') - 1 AS BIGINT) * 68719476736 + CAST(LOCATE(SUBSTRING(h.digest, 4, 1), '0123456789abcdef') - 1 AS BIGINT) * 4294967296 + CAST(LOCATE(SUBSTRING(h.digest, 5, 1), '0123456789abcdef') - 1 AS BIGINT) * 268435456 + CAST(LOCATE(SUBSTRING(h.digest, 6, 1), '0123456789abcdef') - 1 AS BIGINT) * 16777216 + CAST(LOCATE(SUBSTRING(h.digest, 7, 1), '0123456789abcdef') - 1 AS BIGINT) * 1048576 + CAST(LOCATE(SUBSTRING(h.digest, 8, 1), '0123456789abcdef') - 1 AS BIGINT) * 65536 + CAST(LOCATE(SUBSTRING(h.digest, 9, 1), '0123456789abcdef') - 1 AS BIGINT) * 4096 + CAST(LOCATE(SUBSTRING(h.digest, 10, 1), '0123456789abcdef') - 1 AS BIGINT) * 256 + CAST(LOCATE(SUBSTRING(h.digest, 11, 1), '0123456789abcdef') - 1 AS BIGINT) * 16 + CAST(LOCATE(SUBSTRING(h.digest, 12, 1), '0123456789abcdef') - 1 AS BIGINT) * 1
  ) AS draw
FROM (
  SELECT
    k.*,
    MD5(k.conversation_id) AS digest
  FROM conversation_keys AS k
) AS h

-- final query
SELECT
  d.conversation_id,
  o.outcome,
  o.route,
  o.address,
  o.mirror_address,
  o.`database`,
  o.broker_instance,
  o.match_step,
  o.choose_step,
  o.locate_step,
  o.decided_by
FROM conversation_draw AS d
JOIN key_options AS o
  ON o.origin = d.origin
  AND o.service_name = d.service_name
  AND o.broker_key = COALESCE(d.broker_instance, '')
  AND o.routed_at = d.routed_at
WHERE
  o.group_rank = d.draw % o.group_count
  AND o.route_rank = (
    d.draw DIV o.group_count
  ) % o.route_count
  AND o.db_rank = (
    d.draw DIV (
      o.group_count * o.route_count
    )
  ) % o.db_count
UNION ALL
/* Conversations with no decision (origin not a database of the instance, or no */
/* begin_time): a plain inner join above, and this anti join, keep both joins hash joins */
/* (a LEFT JOIN with the pick conditions becomes a nested-loop join in DuckDB). */
SELECT
  c.conversation_id,
  CAST(NULL AS STRING) AS outcome,
  CAST(NULL AS STRING) AS route,
  CAST(NULL AS STRING) AS address,
  CAST(NULL AS STRING) AS mirror_address,
  CAST(NULL AS STRING) AS `database`,
  CAST(NULL AS STRING) AS broker_instance,
  CAST(NULL AS STRING) AS match_step,
  CAST(NULL AS STRING) AS choose_step,
  CAST(NULL AS STRING) AS locate_step,
  CAST(NULL AS STRING) AS decided_by
FROM conversation_keys AS c
LEFT JOIN (
  SELECT DISTINCT
    ko.origin,
    ko.service_name,
    ko.broker_key,
    ko.routed_at
  FROM key_options AS ko
) AS k
  ON k.origin = c.origin
  AND k.service_name = c.service_name
  AND k.broker_key = COALESCE(c.broker_instance, '')
  AND k.routed_at = c.routed_at
WHERE
  k.origin IS NULL
