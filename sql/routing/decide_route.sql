{#-
  One route decision per conversation: the options of resolve_route_options.sql, with the
  arbitrary picks of R2.3 / R3 / R4.2 drawn per conversation by an exponential race
  (-ln(u) / weight, smallest wins), which draws each option with its probability.
  {{ conversations }} must also have conversation_id. pick: 'random' (random() per row).
-#}
WITH
{% include 'routing/_route_steps.sql' %},

conversation_option AS (
    SELECT
        c.conversation_id,
        o.*
    FROM {{ conversations }} AS c
    JOIN route_option AS o
        ON o.origin = c.origin AND o.service_name = c.service_name
        AND o.broker_key = COALESCE(c.broker_instance, '') AND o.routed_at = c.routed_at
),

single_option AS (
    -- Most keys have one possible decision: no draw needed.
    SELECT x.* FROM conversation_option AS x WHERE x.weight = 1.0
),

drawn_option AS (
    SELECT
        x.conversation_id,
        MIN_BY(x.origin, x.race) AS origin,
        MIN_BY(x.service_name, x.race) AS service_name,
        MIN_BY(x.broker_key, x.race) AS broker_key,
        MIN_BY(x.routed_at, x.race) AS routed_at,
        MIN_BY(x.pick_group, x.race) AS pick_group,
        MIN_BY(x.outcome, x.race) AS outcome,
        MIN_BY(x.route_name, x.race) AS route_name,
        MIN_BY(x.address, x.race) AS address,
        MIN_BY(x.mirror_address, x.race) AS mirror_address,
        MIN_BY(x.database_name, x.race) AS database_name,
        MIN_BY(x.decision_broker_instance, x.race) AS decision_broker_instance,
        MIN_BY(x.match_order, x.race) AS match_order,
        MIN_BY(x.choose_order, x.race) AS choose_order,
        MIN_BY(x.locate_step, x.race) AS locate_step,
        MIN_BY(x.decided_by, x.race) AS decided_by,
        MIN_BY(x.weight, x.race) AS weight
    FROM (
        SELECT
            y.*,
            {% if pick == 'random' -%}
            -LN(1.0 - RANDOM()) / y.weight AS race
            {%- else -%}
            {{ raise_unknown_pick(pick) }}
            {%- endif %}
        FROM conversation_option AS y
        WHERE y.weight < 1.0
    ) AS x
    GROUP BY x.conversation_id
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
    CASE WHEN d.broker_key = '' THEN NULL ELSE d.broker_key END AS broker_instance,
    d.outcome,
    d.route_name,
    d.address,
    d.mirror_address,
    d.database_name,
    d.decision_broker_instance,
    'R2.' || CAST(d.match_order AS VARCHAR) AS match_step,
    CASE WHEN d.choose_order IS NOT NULL THEN 'R3.' || CAST(d.choose_order AS VARCHAR) END
        AS choose_step,
    d.locate_step,
    d.decided_by
FROM decision AS d
