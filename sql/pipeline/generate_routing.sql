{#-
  pipeline generate: the routes of a synthetic instance. Route k of $route_count (by k's
  share of route_count) is, in the database of its service (5 + service % 3), or msdb:
    < 45 %    service svc_k, no broker identifier, a network address      (R2.2, R3.3)
    < 65 %    three routes per service, each naming its own broker
              identifier (several instances of one service)               (R2.3, R3.3)
    < 72 %    service svc_k with a mirror address                          (R3.1)
    < 80 %    service svc_k, LOCAL (half of them have the service)         (R3.2, R4)
    < 95 %    service svc_k, network address, expiring at one of four
              instants inside the conversations' time span                 (R1.4)
    < 99.9 %  msdb: forwarding routes for messages from outside            (R1.2, R3.6)
    rest      wildcards (no service, no broker identifier), network; at
              least three, so every user database has one              (R2.5)
  plus AutoCreatedLocal in msdb and each user database (R1.3).
  Inputs: {{ params }} (one row: seed, route_count, start_us, span_us), {{ numbers }} (n).
-#}
{% from 'pipeline/_draw.sql' import guid %}
WITH route_number AS (
    SELECT
        n.n AS k,
        CAST(n.n AS DOUBLE) / CAST(p.route_count AS DOUBLE) AS share,
        CAST(floor(p.route_count * 0.45) AS BIGINT) AS base,
        n.n >= p.route_count - 3 - CAST(floor(p.route_count * 0.001) AS BIGINT) AS is_wildcard,
        p.seed,
        p.start_us,
        p.span_us
    FROM {{ numbers }} AS n
    CROSS JOIN {{ params }} AS p
    WHERE n.n < p.route_count
),
shaped AS (
    SELECT
        g.*,
        CASE
            WHEN g.share >= 0.45 AND g.share < 0.65 THEN g.base + (g.k - g.base) // 3
            ELSE g.k
        END AS service_number
    FROM route_number AS g
)
SELECT
    CAST(CASE
        WHEN s.share >= 0.95 AND NOT s.is_wildcard THEN 4
        ELSE 5 + s.service_number % 3
    END AS INTEGER) AS database_id,
    CAST(65546 + s.k AS INTEGER) AS route_id,
    'Route' || lpad(CAST(s.k AS VARCHAR), 7, '0') AS name,
    CASE
        WHEN s.is_wildcard THEN CAST(NULL AS VARCHAR)
        ELSE 'svc_' || lpad(CAST(s.service_number AS VARCHAR), 7, '0')
    END AS remote_service_name,
    CASE
        WHEN s.share >= 0.45 AND s.share < 0.65
            THEN {{ guid("md5(s.seed || '|broker|' || CAST(s.k AS VARCHAR))") }}
    END AS broker_instance,
    CASE
        WHEN s.share >= 0.8 AND s.share < 0.95
            THEN CAST(make_timestamp(s.start_us + s.span_us * (1 + s.k % 4) // 5) AS TIMESTAMP)
    END AS lifetime,
    CASE
        WHEN s.share >= 0.72 AND s.share < 0.8 THEN 'LOCAL'
        ELSE 'tcp://host' || lpad(CAST(s.k % 100 AS VARCHAR), 3, '0') || '.example.com:4022'
    END AS address,
    CASE
        WHEN s.share >= 0.65 AND s.share < 0.72
            THEN 'tcp://mirror' || lpad(CAST(s.k % 100 AS VARCHAR), 3, '0')
                || '.example.com:4022'
    END AS mirror_address,
    CAST(make_timestamp(s.start_us) AS TIMESTAMP) AS create_date
FROM shaped AS s
UNION ALL
SELECT
    CAST(a.database_id AS INTEGER) AS database_id,
    CAST(65536 + a.database_id AS INTEGER) AS route_id,
    'AutoCreatedLocal' AS name,
    CAST(NULL AS VARCHAR) AS remote_service_name,
    CAST(NULL AS VARCHAR) AS broker_instance,
    CAST(NULL AS TIMESTAMP) AS lifetime,
    'LOCAL' AS address,
    CAST(NULL AS VARCHAR) AS mirror_address,
    CAST(make_timestamp(p.start_us) AS TIMESTAMP) AS create_date
FROM (VALUES (4), (5), (6), (7)) AS a(database_id)
CROSS JOIN {{ params }} AS p
