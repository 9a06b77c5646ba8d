{#-
  pipeline resolve, stage 3: every possible decision per decided key (the route_option CTE
  of _route_steps.sql, as in resolve_route_options.sql), ranked for an exact pick.

  The live engine and decide_route.sql draw a uniform number into slices as wide as each
  option's weight. Across engines that is not reproducible: the weights are DOUBLE in
  DuckDB and DECIMAL in Spark, so a draw near a slice boundary can fall on different sides.
  Here each arbitrary pick is an integer rank instead, in the same nesting as the weights:
  R2.3 picks one broker identifier (group_rank of group_count), R3 one of the routes of
  the choosing step that count as distinct (route_rank of route_count; identical routes
  share one name, the lowest), R4.2 one database holding the service (db_rank of
  db_count). decide_conversations.sql takes the ranks from one integer per conversation,
  so every option keeps exactly its weight's share of the conversations. Each option
  carries its key's number (key_id of decision_keys.sql) and how many options the key has.
  Input: {{ keys }} (decision_keys.sql) and the catalog relations.
-#}
WITH
decided_key AS (
    -- The keys the routing steps decide: a wildcard class once, through its least key.
    SELECT DISTINCT
        k.key_id,
        k.origin,
        k.decided_service_name AS service_name,
        CASE WHEN k.decided_broker_key = '' THEN CAST(NULL AS VARCHAR)
            ELSE k.decided_broker_key END AS broker_instance,
        k.routed_at
    FROM {{ keys }} AS k
),

{% with conversations = 'decided_key', without_weights = true -%}
{% include 'routing/_route_steps.sql' %}
{%- endwith %},

keyed_option AS (
    -- The options with their key's number; the key's own columns are not carried on.
    SELECT
        k.key_id, o.pick_group, COALESCE(o.route_name, '') AS route_key, o.outcome,
        o.route_name, o.address, o.mirror_address, o.database_name,
        o.decision_broker_instance, o.match_order, o.choose_order, o.locate_step,
        o.decided_by
    FROM route_option AS o
    JOIN decided_key AS k
        ON k.origin = o.origin AND k.service_name = o.service_name
        AND COALESCE(k.broker_instance, '') = o.broker_key AND k.routed_at = o.routed_at
),

-- The ranks and counts of the picks are numbered on narrow rows (one per pick group, one
-- per route of a group) and joined back: a window over the options' own wide rows
-- copies every column, and one per rank cost most of this stage (DuckDB at 10M x 100k).
-- The joins back are equalities on pick_group, which is never NULL (_route_steps.sql: the
-- route's broker identifier or '').
ranked_group AS (
    -- R2.3: the pick groups of each key, numbered from 0.
    SELECT
        g.key_id, g.pick_group,
        DENSE_RANK() OVER (PARTITION BY g.key_id ORDER BY g.pick_group) - 1 AS group_rank,
        COUNT(*) OVER (PARTITION BY g.key_id) AS group_count
    FROM (SELECT DISTINCT o.key_id, o.pick_group FROM keyed_option AS o) AS g
),

ranked_route AS (
    -- R3: the routes of each pick group (by name), numbered from 0, each with how many
    -- databases (R4.2 options) it has.
    SELECT
        r.key_id, r.pick_group, r.route_key, r.db_count,
        DENSE_RANK() OVER (PARTITION BY r.key_id, r.pick_group ORDER BY r.route_key) - 1
            AS route_rank,
        COUNT(*) OVER (PARTITION BY r.key_id, r.pick_group) AS route_count
    FROM (
        SELECT o.key_id, o.pick_group, o.route_key, COUNT(*) AS db_count
        FROM keyed_option AS o
        GROUP BY o.key_id, o.pick_group, o.route_key
    ) AS r
),

key_option_count AS (
    SELECT o.key_id, COUNT(*) AS option_count
    FROM keyed_option AS o
    GROUP BY o.key_id
),

ranked_option AS (
    -- R4.2: the databases of each route, numbered from 0.
    SELECT
        o.*,
        ROW_NUMBER() OVER (
            PARTITION BY o.key_id, o.pick_group, o.route_key
            ORDER BY COALESCE(o.database_name, '')
        ) - 1 AS db_rank
    FROM keyed_option AS o
)
SELECT
    r.key_id,
    r.outcome,
    r.route_name AS route,
    r.address,
    r.mirror_address,
    r.database_name AS "database",
    r.decision_broker_instance AS broker_instance,
    'R2.' || CAST(r.match_order AS VARCHAR) AS match_step,
    CASE WHEN r.choose_order IS NOT NULL THEN 'R3.' || CAST(r.choose_order AS VARCHAR) END
        AS choose_step,
    r.locate_step,
    r.decided_by,
    CAST(g.group_rank AS BIGINT) AS group_rank,
    CAST(g.group_count AS BIGINT) AS group_count,
    CAST(t.route_rank AS BIGINT) AS route_rank,
    CAST(t.route_count AS BIGINT) AS route_count,
    CAST(r.db_rank AS BIGINT) AS db_rank,
    CAST(t.db_count AS BIGINT) AS db_count,
    CAST(n.option_count AS BIGINT) AS option_count
FROM ranked_option AS r
JOIN ranked_group AS g
    ON g.key_id = r.key_id AND g.pick_group = r.pick_group
JOIN ranked_route AS t
    ON t.key_id = r.key_id AND t.pick_group = r.pick_group AND t.route_key = r.route_key
JOIN key_option_count AS n
    ON n.key_id = r.key_id
