-- The fragments of one conversation this instance holds in memory to forward (R7.3), as
-- its process holds them when read (a file no process serves shows none).
SELECT f.is_initiator, f.message_sequence_number, f.message_fragment_number,
    f.adjacent_broker_address, f.hops_remaining, f.time_to_live, f.time_consumed
FROM sys.dm_broker_forwarded_messages AS f
WHERE f.conversation_id = $conversation_id
ORDER BY f.message_sequence_number, f.message_fragment_number
