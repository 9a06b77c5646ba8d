-- Conversation endpoints neither CLOSED nor in ERROR with no traffic known since
-- $idle_before, by database and state (C1). pybroker keeps no time of an endpoint's last
-- message, so its last traffic known is the latest of its create_date, the enqueue time of
-- its messages still in a queue (received ones are gone, unless RETENTION keeps them) or in
-- the transmission queue, and the time of the broker events of its conversation. An endpoint
-- with a dialog timer still to fire waits by design and is not counted. An endpoint created
-- since $idle_before is not idle whatever its traffic, so only the older ones are looked up,
-- in the latest times of each queue, each transmission queue and the events, taken first.
WITH queued AS (
    SELECT m.conversation_handle, max(m.message_enqueue_time) AS latest
    FROM sys.queue_messages AS m
    GROUP BY m.conversation_handle
),
transmitted AS (
    SELECT t.conversation_handle, max(t.enqueue_time) AS latest
    FROM sys.transmission_queue AS t
    GROUP BY t.conversation_handle
),
evented AS (
    SELECT b.conversation_id, max(b.event_time) AS latest
    FROM sys.broker_events AS b
    GROUP BY b.conversation_id
),
last_traffic AS (
    SELECT e.database_name, e.state_desc,
        greatest(e.create_date, m.latest, t.latest, b.latest) AS last_traffic
    FROM sys.conversation_endpoints AS e
    LEFT JOIN queued AS m ON m.conversation_handle = e.conversation_handle
    LEFT JOIN transmitted AS t ON t.conversation_handle = e.conversation_handle
    LEFT JOIN evented AS b ON b.conversation_id = e.conversation_id
    WHERE e.state_desc NOT IN ('CLOSED', 'ERROR') AND e.create_date < $idle_before
        AND (e.dialog_timer IS NULL OR e.dialog_timer < $idle_before)
)
SELECT l.database_name, l.state_desc, count(*) AS endpoints, min(l.last_traffic) AS oldest
FROM last_traffic AS l
WHERE l.last_traffic < $idle_before
GROUP BY l.database_name, l.state_desc
ORDER BY l.database_name, l.state_desc
