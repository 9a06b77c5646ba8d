-- At open: messages that were in flight to the network when the process stopped are due
-- again (their conversation's begin time is in the past, and no clock is read at open);
-- the retry loop routes them and hands them to the wire.
UPDATE conversation_endpoints SET transmission_next_attempt = create_date
WHERE transmission_next_attempt IS NULL
    AND conversation_handle IN (
        SELECT t.conversation_handle FROM transmission_queue AS t WHERE NOT t.is_inbound)
