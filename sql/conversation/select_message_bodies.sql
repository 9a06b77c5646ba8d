-- The bodies of the messages RECEIVE read ahead (select_ready_messages.sql), by queuing
-- order: $low and $high bound them (the scan skips the rest by zone maps) and
-- $queuing_order lists them, comma-joined integers (pybroker/conversation/columns.py).
-- Only the rows picked have their body read.
SELECT q.queuing_order, q.message_body
FROM queue_messages AS q
WHERE q.queuing_order BETWEEN $low AND $high
    AND list_contains(
        CAST(string_split($queuing_order, ',') AS BIGINT[]), q.queuing_order)
