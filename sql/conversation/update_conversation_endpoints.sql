-- The changing columns of conversation endpoints, a batch at once (C1, P3, P5, C5). Columns
-- encoded as pybroker/core/conversation/columns.py says.
UPDATE conversation_endpoints AS c
SET state = e.state,
    far_broker_instance = NULLIF(e.far_broker_instance, '~'),
    dialog_timer = make_timestamp(CAST(NULLIF(e.dialog_timer, '~') AS BIGINT)),
    send_sequence = CAST(e.send_sequence AS BIGINT),
    first_unacked_send_sequence = CAST(e.first_unacked_send_sequence AS BIGINT),
    end_dialog_sequence = CAST(NULLIF(e.end_dialog_sequence, '~') AS BIGINT),
    receive_sequence = CAST(e.receive_sequence AS BIGINT),
    receive_sequence_frag = CAST(e.receive_sequence_frag AS INTEGER),
    transmission_retry_count = CAST(e.transmission_retry_count AS INTEGER),
    transmission_next_attempt =
        make_timestamp(CAST(NULLIF(e.transmission_next_attempt, '~') AS BIGINT)),
    error_code = CAST(NULLIF(e.error_code, '~') AS INTEGER),
    error_description = decode(unhex(NULLIF(e.error_description, '~')))
FROM (
    SELECT
        UNNEST(string_split($conversation_handle, ',')) AS conversation_handle,
        UNNEST(string_split($state, ',')) AS state,
        UNNEST(string_split($far_broker_instance, ',')) AS far_broker_instance,
        UNNEST(string_split($dialog_timer, ',')) AS dialog_timer,
        UNNEST(string_split($send_sequence, ',')) AS send_sequence,
        UNNEST(string_split($first_unacked_send_sequence, ',')) AS first_unacked_send_sequence,
        UNNEST(string_split($end_dialog_sequence, ',')) AS end_dialog_sequence,
        UNNEST(string_split($receive_sequence, ',')) AS receive_sequence,
        UNNEST(string_split($receive_sequence_frag, ',')) AS receive_sequence_frag,
        UNNEST(string_split($transmission_retry_count, ',')) AS transmission_retry_count,
        UNNEST(string_split($transmission_next_attempt, ',')) AS transmission_next_attempt,
        UNNEST(string_split($error_code, ',')) AS error_code,
        UNNEST(string_split($error_description, ',')) AS error_description
) AS e
WHERE c.conversation_handle = e.conversation_handle
