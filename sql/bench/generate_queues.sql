{#- `pybroker bench metrics`: $queue_count queues bench_queue_000000.. in database
    $database_id, created at $now. -#}
INSERT INTO service_queues (database_id, name, create_date)
SELECT $database_id, printf('bench_queue_%06d', r.range), CAST($now AS TIMESTAMP)
FROM range(CAST($queue_count AS BIGINT)) AS r
