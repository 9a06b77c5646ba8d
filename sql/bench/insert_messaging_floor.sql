{#- `pybroker bench messaging`, storage floor: one send transaction's rows in one INSERT ...
    SELECT (queuing orders $first to $last - 1, spread over $conversations groups, the same
    256-byte body). -#}
INSERT INTO bench_queue_floor
SELECT 1, 'FloorQueue', r.range, 1, 5, printf('group-%08d', r.range % $conversations),
    printf('handle-%08d', r.range % $conversations), r.range // $conversations, 'FloorService',
    'DEFAULT', 'DEFAULT', 'N', $body, CAST($now AS TIMESTAMP)
FROM range($first, $last) AS r
