-- Broker events, a batch at once (columns encoded as pybroker/core/conversation/columns.py says).
INSERT INTO broker_events (event_id, event_time, event_class, subclass, peer_address,
    conversation_id, message_sequence_number, description)
SELECT CAST(e.event_id AS BIGINT), make_timestamp(CAST(e.event_time AS BIGINT)),
    decode(unhex(e.event_class)), decode(unhex(e.subclass)),
    decode(unhex(NULLIF(e.peer_address, '~'))), NULLIF(e.conversation_id, '~'),
    CAST(NULLIF(e.message_sequence_number, '~') AS BIGINT), decode(unhex(e.description))
FROM (
    SELECT
        UNNEST(string_split($event_id, ',')) AS event_id,
        UNNEST(string_split($event_time, ',')) AS event_time,
        UNNEST(string_split($event_class, ',')) AS event_class,
        UNNEST(string_split($subclass, ',')) AS subclass,
        UNNEST(string_split($peer_address, ',')) AS peer_address,
        UNNEST(string_split($conversation_id, ',')) AS conversation_id,
        UNNEST(string_split($message_sequence_number, ',')) AS message_sequence_number,
        UNNEST(string_split($description, ',')) AS description
) AS e
