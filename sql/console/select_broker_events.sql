-- the console's events: the most recent 200 broker events, newest first
SELECT event_id, event_time, event_class, subclass, peer_address, conversation_id,
    description
FROM sys.broker_events
ORDER BY event_id DESC
LIMIT 200
