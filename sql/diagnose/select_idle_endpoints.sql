-- Conversation endpoints neither CLOSED nor in ERROR with no traffic known since
-- $idle_before, by database and state (C1). pybroker keeps no time of an endpoint's last
-- message, so its last traffic known is the latest of its create_date, the enqueue time of
-- its messages still in a queue (received ones are gone, unless RETENTION keeps them) or in
-- the transmission queue, and the time of the broker events of its conversation. An endpoint
-- with a dialog timer still to fire waits by design and is not counted.
WITH last_traffic AS (
    SELECT e.database_name, e.state_desc, e.conversation_handle,
        greatest(e.create_date, max(m.message_enqueue_time), max(t.enqueue_time),
            max(b.event_time)) AS last_traffic
    FROM sys.conversation_endpoints AS e
    LEFT JOIN sys.queue_messages AS m ON m.conversation_handle = e.conversation_handle
    LEFT JOIN sys.transmission_queue AS t ON t.conversation_handle = e.conversation_handle
    LEFT JOIN sys.broker_events AS b ON b.conversation_id = e.conversation_id
    WHERE e.state_desc NOT IN ('CLOSED', 'ERROR')
        AND (e.dialog_timer IS NULL OR e.dialog_timer < $idle_before)
    GROUP BY e.database_name, e.state_desc, e.conversation_handle, e.create_date
)
SELECT l.database_name, l.state_desc, count(*) AS endpoints, min(l.last_traffic) AS oldest
FROM last_traffic AS l
WHERE l.last_traffic < $idle_before
GROUP BY l.database_name, l.state_desc
ORDER BY l.database_name, l.state_desc
