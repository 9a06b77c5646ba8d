-- sys.queue_messages: the contents of every queue, as SELECT * FROM <queue> shows them in
-- SQL Server. status: 0 retained, 1 ready, 2 incomplete / out of order, 3 retained sent.
CREATE OR REPLACE VIEW sys.queue_messages AS
SELECT d.name AS database_name, m.queue_name, m.status,
    CASE m.status WHEN 0 THEN 'RETAINED' WHEN 1 THEN 'READY'
        WHEN 2 THEN 'INCOMPLETE' WHEN 3 THEN 'RETAINED_SENT' END AS status_desc,
    m.priority, m.queuing_order, m.conversation_group_id, m.conversation_handle,
    m.message_sequence_number, m.service_name, m.service_contract_name, m.message_type_name,
    m.validation, m.body AS message_body,
    -- the body as text when it is UTF-8 (NULL otherwise), for reading at a glance
    TRY(decode(m.body)) AS casted_message_body,
    m.message_enqueue_time
FROM (
    SELECT q.*,
        CASE WHEN q.body_fragments IS NULL THEN q.message_body ELSE p.message_body END
            AS body
    FROM main.queue_messages AS q
    -- a message kept as its fragments (body_fragments, migrations/010): its pieces put
    -- together in order (sorted as a list: an ordered list() of large values ran out of
    -- memory)
    LEFT JOIN (
        SELECT f.conversation_handle, f.message_sequence_number,
            list_reduce(list_transform(list_sort(list({'n': f.fragment_number,
                'p': f.piece_number, 'b': f.message_body})), x -> x.b), (x, y) -> x || y)
                AS message_body
        FROM main.message_fragments AS f
        GROUP BY f.conversation_handle, f.message_sequence_number
    ) AS p ON p.conversation_handle = q.conversation_handle
        AND p.message_sequence_number = q.message_sequence_number
) AS m
JOIN main.databases AS d ON d.database_id = m.database_id
UNION ALL
-- P4.4: a message still being reassembled from the network shows as INCOMPLETE, with the
-- bytes that have arrived so far as its size and no body yet
SELECT d.name, s.queue_name, 2, 'INCOMPLETE', e.priority, NULL, e.conversation_group_id,
    f.conversation_handle, f.message_sequence_number, e.service_name, e.service_contract_name,
    any_value(f.message_type_name), any_value(f.validation), NULL, NULL,
    min(f.arrival_time)
FROM main.message_fragments AS f
JOIN main.conversation_endpoints AS e ON e.conversation_handle = f.conversation_handle
JOIN main.services AS s ON s.database_id = e.database_id AND s.name = e.service_name
JOIN main.databases AS d ON d.database_id = f.database_id
GROUP BY ALL
-- not a message kept as its fragments (each fragment is kept as pieces, migrations/010)
HAVING count(DISTINCT f.fragment_number) < any_value(f.fragment_count)
