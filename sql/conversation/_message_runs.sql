{#- Runs of consecutive messages of one endpoint: ($conversation_handle, $first_sequence,
    $last_sequence), comma-joined in step as pybroker/core/conversation/columns.py encodes them,
    as rows: the messages a DELETE ... USING names, a run a row
    (wire/delete_acknowledged.sql and its kin; columns.runs makes them). -#}
(
    SELECT UNNEST(string_split($conversation_handle, ',')) AS conversation_handle,
        CAST(UNNEST(string_split($first_sequence, ',')) AS BIGINT) AS first_sequence,
        CAST(UNNEST(string_split($last_sequence, ',')) AS BIGINT) AS last_sequence
)
