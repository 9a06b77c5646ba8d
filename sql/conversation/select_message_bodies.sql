-- The bodies of the messages RECEIVE read ahead (select_ready_messages.sql), by queuing
-- order: $low and $high bound them (the scan skips the rest by zone maps) and
-- $queuing_order lists them, comma-joined integers (pybroker/core/conversation/columns.py),
-- joined as a set (list_contains() per row cost 37 ms for 5,000 rows, this 6 ms).
-- body_fragments: the body is kept as that many fragments (migrations/010), read back by
-- pybroker/kernel/messaging/message_parts.py.
SELECT q.queuing_order, q.message_body, q.body_fragments
FROM queue_messages AS q
WHERE q.queuing_order BETWEEN $low AND $high
    AND q.queuing_order IN (
        SELECT CAST(UNNEST(string_split($queuing_order, ',')) AS BIGINT))
