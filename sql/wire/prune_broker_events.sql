-- Bounded retention: only the newest $keep broker events stay.
DELETE FROM broker_events
WHERE event_id <= (SELECT MAX(e.event_id) FROM broker_events AS e) - $keep
