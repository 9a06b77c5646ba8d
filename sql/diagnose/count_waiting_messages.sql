-- The messages of each database's transmission queue enqueued before $waiting_before,
-- grouped by their status text (C4: '' while nothing went wrong), with the oldest.
SELECT t.database_name, t.transmission_status, count(DISTINCT (t.conversation_handle,
    t.message_sequence_number)) AS messages, min(t.enqueue_time) AS oldest
FROM sys.transmission_queue AS t
WHERE t.enqueue_time < $waiting_before
GROUP BY t.database_name, t.transmission_status
ORDER BY t.database_name, messages DESC, t.transmission_status
