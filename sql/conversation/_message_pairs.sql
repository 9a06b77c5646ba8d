{#- Pairs of ($conversation_handle, $message_sequence_number), comma-joined in step as
    pybroker/core/conversation/columns.py encodes them, as rows: the messages a DELETE ... USING
    names (wire/delete_acknowledged.sql and its kin). -#}
(
    SELECT UNNEST(string_split($conversation_handle, ',')) AS conversation_handle,
        CAST(UNNEST(string_split($message_sequence_number, ',')) AS BIGINT)
            AS message_sequence_number
)
