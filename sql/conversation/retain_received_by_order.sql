-- RECEIVE from a queue with RETENTION ON, at commit (C3): the messages a transaction
-- received stay, marked retained (status 0), until their conversation ends.
-- $queuing_order is comma-joined integers (pybroker/core/conversation/columns.py).
UPDATE queue_messages SET status = 0
WHERE queuing_order IN (
    SELECT CAST(UNNEST(string_split($queuing_order, ',')) AS BIGINT)
)
