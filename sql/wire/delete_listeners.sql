-- The broker_listeners rows of the last read (migrations/019), before this one's.
DELETE FROM broker_listeners
