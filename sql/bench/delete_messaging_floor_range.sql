{#- `pybroker bench wire`, (b)'s storage floor: the rows of queuing orders $first to
    $last - 1 out in one DELETE ... RETURNING, as acknowledged messages leave a sender's
    transmission queue. -#}
DELETE FROM bench_queue_floor
WHERE queuing_order >= $first AND queuing_order < $last
RETURNING queuing_order
