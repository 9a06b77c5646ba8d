-- sys.broker_events: what happened on the broker endpoint (connections, logins, messages
-- that could not be delivered or failed their integrity check), newest last.
CREATE OR REPLACE VIEW sys.broker_events AS
SELECT e.event_id, e.event_time, e.event_class, e.subclass, e.peer_address,
    e.conversation_id, e.message_sequence_number, e.description
FROM main.broker_events AS e
