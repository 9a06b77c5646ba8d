-- sys.dm_broker_forwarded_messages: the message fragments this instance is forwarding
-- right now (R7), held in memory for their next hop, in SQL Server's columns; as they are
-- when read (pybroker/kernel/live_views.py). adjacent_broker_address is where the fragment is
-- being sent; time_to_live and time_consumed are in milliseconds (R7.1); is_initiator says
-- the initiator sent it; message_id names the message (the same for all its fragments).
CREATE OR REPLACE VIEW sys.dm_broker_forwarded_messages AS
SELECT f.conversation_id, f.is_initiator, f.to_service_name, f.to_broker_instance,
    f.from_service_name, f.from_broker_instance, f.adjacent_broker_address,
    f.message_sequence_number, f.message_fragment_number, f.hops_remaining,
    f.time_to_live, f.time_consumed, f.message_id
FROM main.broker_forwarded_messages AS f
