-- At open: messages that were in flight to the network when the process stopped are due
-- again now; the retry loop routes them and hands them to the wire.
UPDATE conversation_endpoints SET transmission_next_attempt = $now
WHERE transmission_next_attempt IS NULL
    AND conversation_handle IN (
        SELECT t.conversation_handle FROM transmission_queue AS t WHERE NOT t.is_inbound)
