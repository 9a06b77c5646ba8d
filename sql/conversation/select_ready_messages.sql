-- RECEIVE read ahead inside a transaction (C3): the first conversation groups of the queue
-- in receive order (by their first ready message), each with up to $per_group of its ready
-- messages, as many groups as fit in $budget messages (at least one). Each row carries
-- its group's count of ready messages (more than it read: the group goes on) and the
-- horizon: the first ready message of the first group left out (NULL: none was), before
-- which the rows read are the whole queue. Nothing changes here: what RECEIVE hands out
-- leaves at commit (delete_received_messages.sql).
WITH ready AS (
    SELECT m.queuing_order, m.conversation_group_id,
        MIN(m.queuing_order) OVER (PARTITION BY m.conversation_group_id) AS group_first,
        COUNT(*) OVER (PARTITION BY m.conversation_group_id) AS group_ready,
        ROW_NUMBER() OVER (
            PARTITION BY m.conversation_group_id ORDER BY m.queuing_order) AS group_row
    FROM queue_messages AS m
    WHERE m.database_id = $database_id AND m.queue_name = $queue_name AND m.status = 1
),
groups AS (
    SELECT r.conversation_group_id, r.group_first,
        SUM(LEAST(r.group_ready, $per_group)) OVER (
            ORDER BY r.group_first ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
        ) AS read_before
    FROM ready AS r
    WHERE r.group_row = 1
),
horizon AS (
    SELECT MIN(g.group_first) AS horizon FROM groups AS g WHERE g.read_before >= $budget
)
SELECT q.queuing_order, q.conversation_handle, q.conversation_group_id,
    q.message_sequence_number, q.message_type_name, q.message_body, q.service_name,
    q.service_contract_name, r.group_ready, h.horizon
FROM ready AS r
JOIN groups AS g ON g.conversation_group_id = r.conversation_group_id
JOIN queue_messages AS q ON q.queuing_order = r.queuing_order
CROSS JOIN horizon AS h
WHERE COALESCE(g.read_before, 0) < $budget AND r.group_row <= $per_group
ORDER BY q.queuing_order
