-- RECEIVE, at commit (C3): the messages a transaction received leave their queue, one
-- statement for the whole transaction. $queuing_order is comma-joined integers
-- (pybroker/core/conversation/columns.py); queuing_order is unique in the instance.
DELETE FROM queue_messages
WHERE queuing_order IN (
    SELECT CAST(UNNEST(string_split($queuing_order, ',')) AS BIGINT)
)
