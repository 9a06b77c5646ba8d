-- The trace contexts of messages a transaction put into the transmission queue (written
-- only by an instance that traces, pybroker/kernel/tracing.py). The rows packed in $rows:
-- conversation handle, sequence number, traceparent (a traceparent holds no ',' or ';').
UPDATE transmission_queue AS t SET traceparent = c.traceparent
FROM (
    SELECT r[1] AS conversation_handle, CAST(r[2] AS BIGINT) AS message_sequence_number,
        r[3] AS traceparent
    FROM {% include 'conversation/_packed_rows.sql' %}
) AS c
WHERE NOT t.is_inbound AND t.conversation_handle = c.conversation_handle
    AND t.message_sequence_number = c.message_sequence_number
