-- The last broker event written (events are numbered in the order they happened).
SELECT COALESCE(MAX(e.event_id), 0) FROM broker_events AS e
