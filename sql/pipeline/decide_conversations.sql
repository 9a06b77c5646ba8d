{#-
  pipeline resolve, stage 5: one decision per conversation, the columns of the
  route_decision() macro after conversation_id.

  The arbitrary picks (R2.3 broker identifier, R3 route, R4.2 database) come from one
  48-bit integer per conversation: the first 12 hex digits of md5(conversation_id), read
  digit by digit (both engines compute md5 as lowercase hex; hash() differs between them
  and DuckDB cannot cast hex text to an integer the way Spark's conv() does). The integer
  is split into mixed-radix digits: draw mod group_count picks the identifier, the next
  digit the route, the next the database; exactly one option of the key matches. Over
  many conversations each option gets its weight's share (R2.3: the pick spreads over all
  identifiers). A conversation whose origin is no database of the instance, or with no
  begin_time, keeps a row with NULL decision columns.
  Inputs: {{ conversation_keys }}, {{ key_options }}.
-#}
{% from 'pipeline/_draw.sql' import hex_int %}
WITH conversation_draw AS (
    SELECT
        h.conversation_id, h.origin, h.service_name, h.broker_instance, h.routed_at,
        {{ hex_int('h.digest', 1, 12) }} AS draw
    FROM (
        SELECT k.*, md5(k.conversation_id) AS digest
        FROM {{ conversation_keys }} AS k
    ) AS h
)
SELECT
    d.conversation_id,
    o.outcome,
    o.route,
    o.address,
    o.mirror_address,
    o."database",
    o.broker_instance,
    o.match_step,
    o.choose_step,
    o.locate_step,
    o.decided_by
FROM conversation_draw AS d
JOIN {{ key_options }} AS o
    ON o.origin = d.origin
    AND o.service_name = d.service_name
    AND o.broker_key = COALESCE(d.broker_instance, '')
    AND o.routed_at = d.routed_at
WHERE o.group_rank = d.draw % o.group_count
    AND o.route_rank = (d.draw // o.group_count) % o.route_count
    AND o.db_rank = (d.draw // (o.group_count * o.route_count)) % o.db_count
UNION ALL
-- Conversations with no decision (origin not a database of the instance, or no
-- begin_time): a plain inner join above, and this anti join, keep both joins hash joins
-- (a LEFT JOIN with the pick conditions becomes a nested-loop join in DuckDB).
SELECT
    c.conversation_id,
    CAST(NULL AS VARCHAR) AS outcome,
    CAST(NULL AS VARCHAR) AS route,
    CAST(NULL AS VARCHAR) AS address,
    CAST(NULL AS VARCHAR) AS mirror_address,
    CAST(NULL AS VARCHAR) AS "database",
    CAST(NULL AS VARCHAR) AS broker_instance,
    CAST(NULL AS VARCHAR) AS match_step,
    CAST(NULL AS VARCHAR) AS choose_step,
    CAST(NULL AS VARCHAR) AS locate_step,
    CAST(NULL AS VARCHAR) AS decided_by
FROM {{ conversation_keys }} AS c
LEFT JOIN (
    SELECT DISTINCT ko.origin, ko.service_name, ko.broker_key, ko.routed_at
    FROM {{ key_options }} AS ko
) AS k
    ON k.origin = c.origin
    AND k.service_name = c.service_name
    AND k.broker_key = COALESCE(c.broker_instance, '')
    AND k.routed_at = c.routed_at
WHERE k.origin IS NULL
