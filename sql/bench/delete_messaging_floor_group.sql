{#- `pybroker bench messaging`, storage floor of RECEIVE in its own transaction: the first
    conversation group's first $rows rows in queuing order, out in one DELETE ...
    RETURNING. -#}
DELETE FROM bench_queue_floor
WHERE queuing_order IN (
    SELECT f.queuing_order FROM bench_queue_floor AS f
    WHERE f.conversation_group_id = (
        SELECT arg_min(g.conversation_group_id, g.queuing_order) FROM bench_queue_floor AS g
    )
    ORDER BY f.queuing_order
    LIMIT $rows
)
RETURNING queuing_order, conversation_handle, message_sequence_number, message_body
