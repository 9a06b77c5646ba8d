-- Messages that cannot be delivered now, into the sending database's transmission queue
-- (C4, P8), a batch at once. Columns encoded as pybroker/conversation/columns.py says.
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
        UNNEST(string_split($database_id, ',')) AS database_id,
        UNNEST(string_split($conversation_handle, ',')) AS conversation_handle,
        UNNEST(string_split($message_sequence_number, ',')) AS message_sequence_number,
        UNNEST(string_split($message_size, ',')) AS message_size,
        UNNEST(string_split($to_service_name, ',')) AS to_service_name,
        UNNEST(string_split($to_broker_instance, ',')) AS to_broker_instance,
        UNNEST(string_split($from_service_name, ',')) AS from_service_name,
        UNNEST(string_split($service_contract_name, ',')) AS service_contract_name,
        UNNEST(string_split($message_type_name, ',')) AS message_type_name,
        UNNEST(string_split($validation, ',')) AS validation,
        UNNEST(string_split($is_end_of_dialog, ',')) AS is_end_of_dialog,
        UNNEST(string_split($is_conversation_error, ',')) AS is_conversation_error,
        UNNEST(string_split($priority, ',')) AS priority,
        UNNEST(string_split($enqueue_time, ',')) AS enqueue_time,
        UNNEST(string_split($message_body, ',')) AS message_body,
        UNNEST(string_split($transmission_status, ',')) AS transmission_status
) AS t
