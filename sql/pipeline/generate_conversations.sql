{#-
  pipeline generate: $conversation_count conversations. Service popularity is skewed (the
  square of a uniform draw favours low service numbers) over 102 % of the route count, so
  some services have no route of their own (wildcards, R2.5). 10 % arrive from outside
  (msdb's table, R1.2); 70 % begin in their service's database, 20 % in another one.
  5 % name a broker identifier: for a service with several instances one of its
  identifiers (R2.1), otherwise one nothing names. Begin times spread uniformly over the
  span, across the routes' expiry instants (R1.4). Inputs: {{ params }}, {{ numbers }}.
-#}
{% from 'pipeline/_draw.sql' import guid, uniform %}
WITH drawn AS (
    SELECT
        n.n,
        p.seed,
        p.route_count,
        p.start_us,
        p.span_us,
        CAST(floor(p.route_count * 0.45) AS BIGINT) AS base,
        md5(p.seed || '|conversation|' || CAST(n.n AS VARCHAR)) AS digest
    FROM {{ numbers }} AS n
    CROSS JOIN {{ params }} AS p
    WHERE n.n < p.conversation_count
),
shaped AS (
    SELECT
        d.*,
        CAST(floor({{ uniform('d.digest', 1) }} * {{ uniform('d.digest', 1) }}
            * d.route_count * 1.02) AS BIGINT) AS service_number,
        {{ uniform('d.digest', 9) }} AS origin_draw,
        {{ uniform('d.digest', 17) }} AS broker_draw,
        {{ uniform('d.digest', 25) }} AS time_draw
    FROM drawn AS d
)
SELECT
    {{ guid("md5(s.seed || '|id|' || CAST(s.n AS VARCHAR))") }} AS conversation_id,
    CASE
        WHEN s.origin_draw < 0.1 THEN 'outside'
        ELSE CASE 5 + (s.service_number + CASE WHEN s.origin_draw < 0.8 THEN 0 ELSE 1 END) % 3
            WHEN 5 THEN 'Sales' WHEN 6 THEN 'Inventory' ELSE 'Billing' END
    END AS origin,
    'svc_' || lpad(CAST(s.service_number AS VARCHAR), 7, '0') AS service_name,
    CASE
        WHEN s.broker_draw >= 0.05 THEN CAST(NULL AS VARCHAR)
        WHEN s.service_number >= s.base
            AND s.base + 3 * (s.service_number - s.base) + 2
                < CAST(floor(s.route_count * 0.65) AS BIGINT)
            THEN {{ guid("md5(s.seed || '|broker|' || CAST(s.base + 3 * (s.service_number - s.base) + s.n % 3 AS VARCHAR))") }}
        ELSE {{ guid("md5(s.seed || '|nobroker|' || CAST(s.service_number AS VARCHAR))") }}
    END AS broker_instance,
    CAST(make_timestamp(s.start_us + CAST(floor(s.time_draw * s.span_us) AS BIGINT))
        AS TIMESTAMP) AS begin_time
FROM shaped AS s
