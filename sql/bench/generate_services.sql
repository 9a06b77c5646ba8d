{#- `pybroker bench routing`: services for half of the LOCAL routes (the other half stay
    unknown, so R3.2 falls through to DELAYED for them). -#}
INSERT INTO services (database_id, name, queue_name, create_date)
SELECT $database_id, printf('svc_%06d', r.range), 'BenchQueue', CAST($now AS TIMESTAMP)
FROM range(CAST($route_count * 0.8 AS BIGINT), CAST($route_count * 0.85 AS BIGINT)) AS r
