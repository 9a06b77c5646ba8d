-- The fragments the forwarder holds (R7), a snapshot at once (columns encoded as
-- pybroker/core/conversation/columns.py says).
INSERT INTO broker_forwarded_messages (conversation_id, is_initiator, to_service_name,
    to_broker_instance, from_service_name, from_broker_instance, adjacent_broker_address,
    message_sequence_number, message_fragment_number, hops_remaining, time_to_live,
    time_consumed, message_id)
SELECT f.conversation_id, f.is_initiator = '1', decode(unhex(f.to_service_name)),
    NULLIF(f.to_broker_instance, '~'), decode(unhex(f.from_service_name)),
    f.from_broker_instance, decode(unhex(f.adjacent_broker_address)),
    CAST(f.message_sequence_number AS BIGINT), CAST(f.message_fragment_number AS INTEGER),
    CAST(f.hops_remaining AS TINYINT), CAST(f.time_to_live AS INTEGER),
    CAST(f.time_consumed AS INTEGER), f.message_id
FROM (
    SELECT
        UNNEST(string_split($conversation_id, ',')) AS conversation_id,
        UNNEST(string_split($is_initiator, ',')) AS is_initiator,
        UNNEST(string_split($to_service_name, ',')) AS to_service_name,
        UNNEST(string_split($to_broker_instance, ',')) AS to_broker_instance,
        UNNEST(string_split($from_service_name, ',')) AS from_service_name,
        UNNEST(string_split($from_broker_instance, ',')) AS from_broker_instance,
        UNNEST(string_split($adjacent_broker_address, ',')) AS adjacent_broker_address,
        UNNEST(string_split($message_sequence_number, ',')) AS message_sequence_number,
        UNNEST(string_split($message_fragment_number, ',')) AS message_fragment_number,
        UNNEST(string_split($hops_remaining, ',')) AS hops_remaining,
        UNNEST(string_split($time_to_live, ',')) AS time_to_live,
        UNNEST(string_split($time_consumed, ',')) AS time_consumed,
        UNNEST(string_split($message_id, ',')) AS message_id
) AS f
