{#- `pybroker bench messaging`: the storage floor, a bare table of queue_messages' columns
    (no engine: no endpoints, no routing, no column encoding; not body_fragments, which
    only a message that crossed the wire in fragments sets). -#}
CREATE OR REPLACE TABLE bench_queue_floor AS
SELECT * EXCLUDE (body_fragments) FROM queue_messages LIMIT 0
