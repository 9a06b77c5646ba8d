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
    SELECT o.*, k.key_id
    FROM route_option AS o
    JOIN decided_key AS k
        ON k.origin = o.origin AND k.service_name = o.service_name
        AND COALESCE(k.broker_instance, '') = o.broker_key AND k.routed_at = o.routed_at
),

ranked_option AS (
    SELECT
        o.*,
        DENSE_RANK() OVER (PARTITION BY o.key_id ORDER BY o.pick_group) AS group_rank,
        DENSE_RANK() OVER (
            PARTITION BY o.key_id, o.pick_group ORDER BY COALESCE(o.route_name, '')
        ) AS route_rank,
        ROW_NUMBER() OVER (
            PARTITION BY o.key_id, o.pick_group, COALESCE(o.route_name, '')
            ORDER BY COALESCE(o.database_name, '')
        ) AS db_rank,
        COUNT(*) OVER (
            PARTITION BY o.key_id, o.pick_group, COALESCE(o.route_name, '')
        ) AS db_count
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
    CAST(r.group_rank - 1 AS BIGINT) AS group_rank,
    CAST(MAX(r.group_rank) OVER (PARTITION BY r.key_id) AS BIGINT) AS group_count,
    CAST(r.route_rank - 1 AS BIGINT) AS route_rank,
    CAST(MAX(r.route_rank) OVER (PARTITION BY r.key_id, r.pick_group) AS BIGINT)
        AS route_count,
    CAST(r.db_rank - 1 AS BIGINT) AS db_rank,
    CAST(r.db_count AS BIGINT) AS db_count,
    CAST(COUNT(*) OVER (PARTITION BY r.key_id) AS BIGINT) AS option_count
FROM ranked_option AS r
