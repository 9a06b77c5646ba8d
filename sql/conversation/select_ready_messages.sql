-- RECEIVE read ahead inside a transaction (C3): the first conversation groups of the queue
-- in receive order (by their first ready message), each with up to $per_group of its ready
-- messages, as many groups as fit in $budget messages (at least one). Each row carries
-- its group's count of ready messages (more than it read: the group goes on) and the
-- horizon: the first ready message of the first group left out (NULL: none was), before
-- which the rows read are the whole queue. Nothing changes here: what RECEIVE hands out
-- leaves at commit (delete_received_messages.sql). No bodies: select_message_bodies.sql
-- fetches those of the rows read (windowing and sorting rows with their bodies moved every
-- ready body through the sort: 17 ms for one 1 MiB message of 40 ready, against ~1 ms).
-- $in_flight: the queuing orders open transactions received (comma-joined, '' for none;
-- C7): still in the table until they commit, but no longer there for anyone else.
WITH flying AS (
    SELECT TRY_CAST(UNNEST(string_split($in_flight, ',')) AS BIGINT) AS queuing_order
),
groups AS (
    SELECT m.conversation_group_id, MIN(m.queuing_order) AS group_first,
        COUNT(*) AS group_ready
    FROM queue_messages AS m
    WHERE m.database_id = $database_id AND m.queue_name = $queue_name AND m.status = 1
        AND m.queuing_order NOT IN (SELECT f.queuing_order FROM flying AS f
                                    WHERE f.queuing_order IS NOT NULL)
    GROUP BY m.conversation_group_id
),
ranked AS (
    SELECT g.conversation_group_id, g.group_first, g.group_ready,
        COALESCE(SUM(LEAST(g.group_ready, $per_group)) OVER (
            ORDER BY g.group_first ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
        ), 0) AS read_before
    FROM groups AS g
),
horizon AS (
    SELECT MIN(r.group_first) AS horizon FROM ranked AS r WHERE r.read_before >= $budget
)
SELECT q.queuing_order, q.conversation_handle, q.conversation_group_id,
    q.message_sequence_number, q.message_type_name, q.service_name,
    q.service_contract_name, r.group_ready, h.horizon
FROM queue_messages AS q
JOIN ranked AS r ON r.conversation_group_id = q.conversation_group_id
CROSS JOIN horizon AS h
WHERE q.database_id = $database_id AND q.queue_name = $queue_name AND q.status = 1
    AND q.queuing_order NOT IN (SELECT f.queuing_order FROM flying AS f
                                WHERE f.queuing_order IS NOT NULL)
    AND r.read_before < $budget
QUALIFY ROW_NUMBER() OVER (
    PARTITION BY q.conversation_group_id ORDER BY q.queuing_order) <= $per_group
ORDER BY q.queuing_order
