-- The messages of one conversation that have not left a database of this instance (C4),
-- outbound (the sender's, until acknowledged) or inbound (P8: the queue they are for is
-- off), one row per message with its status text.
SELECT t.database_name, t.conversation_handle, e.is_initiator, t.message_sequence_number,
    t.message_type_name, t.enqueue_time, t.transmission_status, t.is_inbound,
    t.is_end_of_dialog, t.is_conversation_error
FROM sys.transmission_queue AS t
JOIN sys.conversation_endpoints AS e ON e.conversation_handle = t.conversation_handle
WHERE e.conversation_id = $conversation_id
GROUP BY ALL
ORDER BY t.enqueue_time, t.message_sequence_number
