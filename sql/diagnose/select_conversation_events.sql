-- The broker events of one conversation (messages dropped, refused, corrupted), and the
-- connection events since $since towards the addresses its routes send to ($peers), which
-- say why a hop cannot be reached.
SELECT e.event_time, e.event_class, e.subclass, e.peer_address, e.conversation_id,
    e.message_sequence_number, e.description
FROM sys.broker_events AS e
WHERE e.conversation_id = $conversation_id
    OR (e.conversation_id IS NULL AND e.event_time >= $since
        AND list_contains($peers, e.peer_address))
ORDER BY e.event_time, e.event_id
