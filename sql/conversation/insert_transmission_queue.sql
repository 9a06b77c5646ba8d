-- Messages that cannot be delivered now, into the sending database's transmission queue
-- (C4, P8), a batch at once. The rows packed in $rows, their columns encoded, as
-- pybroker/core/conversation/columns.py says.
INSERT INTO transmission_queue (database_id, conversation_handle, message_sequence_number,
    fragment_number, fragment_count, message_size, to_service_name, to_broker_instance,
    from_service_name, service_contract_name, message_type_name, validation,
    is_end_of_dialog, is_conversation_error, priority, enqueue_time, message_body,
    transmission_status, is_inbound)
SELECT
    CAST(t.database_id AS INTEGER),
    t.conversation_handle,
    CAST(t.message_sequence_number AS BIGINT),
    0,
    1,
    CAST(t.message_size AS BIGINT),
    decode(unhex(t.to_service_name)),
    NULLIF(t.to_broker_instance, '~'),
    decode(unhex(t.from_service_name)),
    decode(unhex(t.service_contract_name)),
    decode(unhex(t.message_type_name)),
    t.validation,
    t.is_end_of_dialog = '1',
    t.is_conversation_error = '1',
    CAST(t.priority AS TINYINT),
    make_timestamp(CAST(t.enqueue_time AS BIGINT)),
    from_base64(NULLIF(t.message_body, '~')),
    decode(unhex(t.transmission_status)),
    CAST($is_inbound AS BOOLEAN)
FROM (
    SELECT
        r[1] AS database_id,
        r[2] AS conversation_handle,
        r[3] AS message_sequence_number,
        r[4] AS message_size,
        r[5] AS to_service_name,
        r[6] AS to_broker_instance,
        r[7] AS from_service_name,
        r[8] AS service_contract_name,
        r[9] AS message_type_name,
        r[10] AS validation,
        r[11] AS is_end_of_dialog,
        r[12] AS is_conversation_error,
        r[13] AS priority,
        r[14] AS enqueue_time,
        r[15] AS message_body,
        r[16] AS transmission_status
    FROM {% include 'conversation/_packed_rows.sql' %}
) AS t
