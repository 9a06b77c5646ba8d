-- The messages in each database's transmission queue, by status text (a reading that
-- diagnose --since compares with a later one).
SELECT t.database_name, t.transmission_status, count(DISTINCT (t.conversation_handle,
    t.message_sequence_number)) AS messages
FROM sys.transmission_queue AS t
GROUP BY t.database_name, t.transmission_status
ORDER BY t.database_name, t.transmission_status
