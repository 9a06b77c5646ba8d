{#-
  pipeline resolve, stage 4: one decision per conversation, the columns of the
  route_decision() macro after conversation_id.

  Each conversation finds its key (decision_keys.sql) by its (origin, service_name,
  broker_key) and the epoch its begin_time falls in, and from then on joins on integers
  with equality only: its key's pick group, the group's route, the route's database.
  The arbitrary picks (R2.3 broker identifier, R3 route, R4.2 database) come from one
  48-bit integer per conversation, the first 12 hex digits of md5(conversation_id) (both
  engines compute md5 as lowercase hex; hash() differs between them): draw mod group_count
  picks the identifier, the next mixed-radix digit the route, the next the database. Over
  many conversations each option gets its weight's share (R2.3: the pick spreads over all
  identifiers). A key with one option needs no draw. A conversation whose origin is no
  database of the instance, or with no begin_time, keeps a row with NULL decision columns.
  A key of a wildcard class was decided through the class's least key: its decision names
  the conversation's own broker identifier (R2.1-R2.7 carry it into the decision).
  Inputs: {{ conversations }}, {{ keys }} (decision_keys.sql), {{ key_options }};
  engine: {{ engine }} (the draw's cast).
-#}
{% from 'pipeline/_draw.sql' import draw48 %}
WITH keyed AS (
    SELECT
        c.conversation_id,
        k.key_id,
        k.in_class,
        k.broker_key,
        k.group_count,
        CASE WHEN k.option_count > 1 THEN {{ draw48('md5(c.conversation_id)', engine) }}
            ELSE CAST(0 AS BIGINT) END AS draw
    FROM {{ conversations }} AS c
    LEFT JOIN (
        -- the keys with their options' counts: one join per conversation
        SELECT km.*, n.group_count, n.option_count
        FROM {{ keys }} AS km
        JOIN (
            SELECT DISTINCT o.key_id, o.group_count, o.option_count
            FROM {{ key_options }} AS o
        ) AS n
            ON n.key_id = km.key_id
    ) AS k
        ON k.origin = c.origin
        AND k.service_name = c.service_name
        AND k.broker_key = COALESCE(lower(c.broker_instance), '')
        AND c.begin_time >= k.routed_at
        AND c.begin_time <= k.epoch_last
),
grouped AS (
    SELECT d.*, d.draw % d.group_count AS group_rank, g.route_count
    FROM keyed AS d
    LEFT JOIN (
        SELECT DISTINCT o.key_id, o.group_rank, o.route_count
        FROM {{ key_options }} AS o
    ) AS g
        ON g.key_id = d.key_id AND g.group_rank = d.draw % d.group_count
),
routed AS (
    SELECT
        d.*,
        (d.draw // d.group_count) % d.route_count AS route_rank,
        (d.draw // (d.group_count * d.route_count)) % r.db_count AS db_rank
    FROM grouped AS d
    LEFT JOIN (
        SELECT DISTINCT o.key_id, o.group_rank, o.route_rank, o.db_count
        FROM {{ key_options }} AS o
    ) AS r
        ON r.key_id = d.key_id AND r.group_rank = d.group_rank
        AND r.route_rank = (d.draw // d.group_count) % d.route_count
)
SELECT
    d.conversation_id,
    o.outcome,
    o.route,
    o.address,
    o.mirror_address,
    o."database",
    CASE WHEN d.in_class AND d.broker_key <> '' THEN d.broker_key ELSE o.broker_instance END
        AS broker_instance,
    o.match_step,
    o.choose_step,
    o.locate_step,
    o.decided_by
FROM routed AS d
LEFT JOIN {{ key_options }} AS o
    ON o.key_id = d.key_id AND o.group_rank = d.group_rank
    AND o.route_rank = d.route_rank AND o.db_rank = d.db_rank
