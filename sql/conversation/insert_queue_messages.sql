-- Messages into queues, a batch at once (one fragment each; local delivery). The rows
-- packed in $rows, their columns encoded, as pybroker/core/conversation/columns.py says.
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
        r[1] AS database_id,
        r[2] AS queue_name,
        r[3] AS queuing_order,
        r[4] AS status,
        r[5] AS priority,
        r[6] AS conversation_group_id,
        r[7] AS conversation_handle,
        r[8] AS message_sequence_number,
        r[9] AS service_name,
        r[10] AS service_contract_name,
        r[11] AS message_type_name,
        r[12] AS validation,
        r[13] AS message_body,
        r[14] AS message_enqueue_time
    FROM {% include 'conversation/_packed_rows.sql' %}
) AS m
