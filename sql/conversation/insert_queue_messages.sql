-- Messages into queues, a batch at once (one fragment each; local delivery). Columns
-- encoded as pybroker/conversation/columns.py says.
INSERT INTO queue_messages (database_id, queue_name, queuing_order, status, priority,
    conversation_group_id, conversation_handle, message_sequence_number, service_name,
    service_contract_name, message_type_name, validation, message_body, message_enqueue_time)
SELECT
    CAST(m.database_id AS INTEGER),
    decode(unhex(m.queue_name)),
    CAST(m.queuing_order AS BIGINT),
    CAST(m.status AS TINYINT),
    CAST(m.priority AS TINYINT),
    m.conversation_group_id,
    m.conversation_handle,
    CAST(m.message_sequence_number AS BIGINT),
    decode(unhex(m.service_name)),
    decode(unhex(m.service_contract_name)),
    decode(unhex(m.message_type_name)),
    m.validation,
    from_base64(NULLIF(m.message_body, '~')),
    make_timestamp(CAST(m.message_enqueue_time AS BIGINT))
FROM (
    SELECT
        UNNEST(string_split($database_id, ',')) AS database_id,
        UNNEST(string_split($queue_name, ',')) AS queue_name,
        UNNEST(string_split($queuing_order, ',')) AS queuing_order,
        UNNEST(string_split($status, ',')) AS status,
        UNNEST(string_split($priority, ',')) AS priority,
        UNNEST(string_split($conversation_group_id, ',')) AS conversation_group_id,
        UNNEST(string_split($conversation_handle, ',')) AS conversation_handle,
        UNNEST(string_split($message_sequence_number, ',')) AS message_sequence_number,
        UNNEST(string_split($service_name, ',')) AS service_name,
        UNNEST(string_split($service_contract_name, ',')) AS service_contract_name,
        UNNEST(string_split($message_type_name, ',')) AS message_type_name,
        UNNEST(string_split($validation, ',')) AS validation,
        UNNEST(string_split($message_body, ',')) AS message_body,
        UNNEST(string_split($message_enqueue_time, ',')) AS message_enqueue_time
) AS m
