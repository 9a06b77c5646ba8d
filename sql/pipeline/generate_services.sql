{#-
  pipeline generate: services for half of the LOCAL routes (the rest stay unknown, so R3.2
  falls through for them); every second one also has a copy in the next database, so
  R4.2 has several databases to choose from. Inputs: {{ params }}, {{ numbers }}.
-#}
WITH local_service AS (
    SELECT n.n AS k, p.start_us
    FROM {{ numbers }} AS n
    CROSS JOIN {{ params }} AS p
    WHERE n.n >= CAST(floor(p.route_count * 0.72) AS BIGINT)
        AND n.n < CAST(floor(p.route_count * 0.76) AS BIGINT)
)
SELECT
    CAST(5 + l.k % 3 AS INTEGER) AS database_id,
    'svc_' || lpad(CAST(l.k AS VARCHAR), 7, '0') AS name,
    'PipelineQueue' AS queue_name,
    CAST(make_timestamp(l.start_us) AS TIMESTAMP) AS create_date
FROM local_service AS l
UNION ALL
SELECT
    CAST(5 + (l.k + 1) % 3 AS INTEGER) AS database_id,
    'svc_' || lpad(CAST(l.k AS VARCHAR), 7, '0') AS name,
    'PipelineQueue' AS queue_name,
    CAST(make_timestamp(l.start_us) AS TIMESTAMP) AS create_date
FROM local_service AS l
WHERE l.k % 2 = 0
