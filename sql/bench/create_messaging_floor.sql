{#- `pybroker bench messaging`: the storage floor, a bare table of queue_messages' columns
    (no engine: no endpoints, no routing, no column encoding). -#}
CREATE OR REPLACE TABLE bench_queue_floor AS SELECT * FROM queue_messages LIMIT 0
