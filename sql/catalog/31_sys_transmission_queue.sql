-- sys.transmission_queue: messages that have not left their sending database yet, with
-- why (C4: transmission_status is '' while nothing went wrong).
CREATE OR REPLACE VIEW sys.transmission_queue AS
SELECT d.name AS database_name, t.conversation_handle, t.to_service_name,
    t.to_broker_instance, t.from_service_name, t.service_contract_name, t.enqueue_time,
    t.message_sequence_number, t.message_type_name, t.is_conversation_error,
    t.is_end_of_dialog,
    CASE WHEN t.body_pieces IS NULL THEN t.message_body ELSE p.message_body END
        AS message_body,
    t.transmission_status, t.priority, t.fragment_number, t.fragment_count,
    t.message_size, t.is_inbound
FROM main.transmission_queue AS t
JOIN main.databases AS d ON d.database_id = t.database_id
-- a large body kept as pieces (body_pieces, migrations/011): put together in order (sorted
-- as a list: an ordered list() of large values ran out of memory)
LEFT JOIN (
    SELECT p.conversation_handle, p.message_sequence_number,
        list_reduce(list_transform(list_sort(list({'n': p.piece_number,
            'b': p.message_body})), x -> x.b), (x, y) -> x || y) AS message_body
    FROM main.transmission_queue_pieces AS p
    GROUP BY p.conversation_handle, p.message_sequence_number
) AS p ON t.body_pieces IS NOT NULL AND p.conversation_handle = t.conversation_handle
    AND p.message_sequence_number = t.message_sequence_number
