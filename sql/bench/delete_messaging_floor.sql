{#- `pybroker bench messaging`, storage floor: one receive transaction's rows, the first
    $rows in queuing order, out in one DELETE ... RETURNING. -#}
DELETE FROM bench_queue_floor
WHERE queuing_order IN (
    SELECT f.queuing_order FROM bench_queue_floor AS f ORDER BY f.queuing_order LIMIT $rows
)
RETURNING queuing_order, conversation_handle, message_sequence_number, message_body
