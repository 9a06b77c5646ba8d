{#-
  One route decision per conversation: the options of resolve_route_options.sql, with the
  arbitrary picks of R2.3 / R3 / R4.2 drawn per conversation by an exponential race
  (-ln(u) / weight, smallest wins), which draws each option with its probability.
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

ranked_option AS (
    -- The options of each key with several (weight < 1), numbered.
    SELECT
        o.*,
        ROW_NUMBER() OVER (
            PARTITION BY o.origin, o.service_name, o.broker_key, o.routed_at
            ORDER BY o.pick_group, o.outcome, o.route_name, o.database_name
        ) AS option_rank
    FROM decision_option AS o
    WHERE o.weight < 1.0
),

single_option AS (
    -- A key with one possible decision: no draw needed.
    SELECT c.conversation_id, o.*, 1 AS option_rank
    FROM {{ conversations }} AS c
    JOIN decision_option AS o
        ON o.origin = c.origin AND o.service_name = c.service_name
        AND o.broker_key = COALESCE(c.broker_instance, '') AND o.routed_at = c.routed_at
    WHERE o.weight = 1.0
),

drawn_rank AS (
    -- Several possible decisions: one exponential race per conversation picks a rank.
    SELECT
        x.conversation_id,
        x.origin,
        x.service_name,
        x.broker_key,
        x.routed_at,
        MIN_BY(x.option_rank, x.race) AS option_rank
    FROM (
        SELECT
            c.conversation_id,
            o.origin,
            o.service_name,
            o.broker_key,
            o.routed_at,
            o.option_rank,
            {% if pick == 'random' -%}
            -LN(1.0 - RANDOM()) / o.weight AS race
            {%- else -%}
            {{ raise_unknown_pick(pick) }}
            {%- endif %}
        FROM {{ conversations }} AS c
        JOIN ranked_option AS o
            ON o.origin = c.origin AND o.service_name = c.service_name
            AND o.broker_key = COALESCE(c.broker_instance, '') AND o.routed_at = c.routed_at
    ) AS x
    GROUP BY x.conversation_id, x.origin, x.service_name, x.broker_key, x.routed_at
),

drawn_option AS (
    SELECT r.conversation_id, o.*
    FROM drawn_rank AS r
    JOIN ranked_option AS o
        ON o.origin = r.origin AND o.service_name = r.service_name
        AND o.broker_key = r.broker_key AND o.routed_at = r.routed_at
        AND o.option_rank = r.option_rank
),

decision AS (
    SELECT * FROM single_option
    UNION ALL
    SELECT * FROM drawn_option
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
