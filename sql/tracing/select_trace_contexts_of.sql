-- The trace contexts of what the endpoints in $conversation_handle (comma-joined) still
-- have to send, keyed as the network knows each message: conversation id, whether the
-- initiator sent it, sequence number (pybroker/kernel/tracing.py).
SELECT e.conversation_id, e.is_initiator, t.message_sequence_number, t.traceparent
FROM transmission_queue AS t
JOIN conversation_endpoints AS e ON e.conversation_handle = t.conversation_handle
WHERE NOT t.is_inbound AND t.traceparent IS NOT NULL AND t.fragment_number = 0
    AND t.conversation_handle IN (SELECT UNNEST(string_split($conversation_handle, ',')))
