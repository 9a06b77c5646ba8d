{#-
  One route decision per conversation: the options of resolve_route_options.sql, with the
  arbitrary picks of R2.3 / R3 / R4.2 drawn per conversation: one uniform draw in [0, 1)
  falls in the slice of exactly one option, each slice as wide as the option's probability.
  {{ conversations }} must also have conversation_id. pick: 'random' (random() per row).
-#}
WITH
{% include 'routing/_route_steps.sql' %},

decision_option AS (
    -- The output columns, computed once per option rather than once per conversation.
    SELECT
        o.origin,
        o.service_name,
        o.broker_key,
        o.routed_at,
        o.pick_group,
        o.weight,
        CASE WHEN o.broker_key = '' THEN NULL ELSE o.broker_key END AS broker_instance,
        o.outcome,
        o.route_name,
        o.address,
        o.mirror_address,
        o.database_name,
        o.decision_broker_instance,
        'R2.' || CAST(o.match_order AS VARCHAR) AS match_step,
        CASE WHEN o.choose_order IS NOT NULL THEN 'R3.' || CAST(o.choose_order AS VARCHAR) END
            AS choose_step,
        o.locate_step,
        o.decided_by
    FROM route_option AS o
),

decision_key AS (
    -- Every conversation key numbered, so the 1M-row joins below compare one integer.
    SELECT
        k.origin, k.service_name, k.broker_key, k.routed_at,
        ROW_NUMBER() OVER (ORDER BY k.origin, k.service_name, k.broker_key, k.routed_at)
            AS key_id
    FROM (
        -- qualified names: inside the route_decision() macro, a bare "origin" would be the
        -- macro's parameter
        SELECT DISTINCT ck.origin, ck.service_name, ck.broker_key, ck.routed_at
        FROM conversation_key AS ck
    ) AS k
),

option_range AS (
    -- Each option owns the slice [range_low, range_high) of [0, 1) as wide as its
    -- probability; the last option's slice is closed at 2 so rounding never leaves a gap.
    SELECT
        x.*,
        x.cumulative - x.weight AS range_low,
        CASE WHEN x.option_rank = x.option_count THEN 2.0 ELSE x.cumulative END AS range_high
    FROM (
        SELECT
            k.key_id,
            o.*,
            ROW_NUMBER() OVER w AS option_rank,
            COUNT(*) OVER (PARTITION BY k.key_id) AS option_count,
            SUM(o.weight) OVER (w ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
                AS cumulative
        FROM decision_option AS o
        JOIN decision_key AS k
            ON k.origin = o.origin AND k.service_name = o.service_name
            AND k.broker_key = o.broker_key AND k.routed_at = o.routed_at
        WINDOW w AS (
            PARTITION BY k.key_id
            ORDER BY o.pick_group, o.outcome, o.route_name, o.database_name
        )
    ) AS x
),

conversation_draw AS (
    -- One uniform draw per conversation (R2.3, R3, R4.2 picks are per conversation).
    SELECT
        c.conversation_id,
        k.key_id,
        {% if pick == 'random' -%}
        RANDOM() AS draw
        {%- else -%}
        {{ raise_unknown_pick(pick) }}
        {%- endif %}
    FROM {{ conversations }} AS c
    JOIN decision_key AS k
        ON k.origin = c.origin AND k.service_name = c.service_name
        AND k.broker_key = COALESCE(c.broker_instance, '') AND k.routed_at = c.routed_at
),

decision AS (
    SELECT d.conversation_id, o.*
    FROM conversation_draw AS d
    JOIN option_range AS o
        ON o.key_id = d.key_id AND d.draw >= o.range_low AND d.draw < o.range_high
)
SELECT
    d.conversation_id,
    d.origin,
    d.service_name,
    d.broker_instance,
    d.outcome,
    d.route_name,
    d.address,
    d.mirror_address,
    d.database_name,
    d.decision_broker_instance,
    d.match_step,
    d.choose_step,
    d.locate_step,
    d.decided_by
FROM decision AS d
