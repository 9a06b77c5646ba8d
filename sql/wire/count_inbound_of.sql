-- P8: how many arrivals of one conversation endpoint wait in the transmission queue.
SELECT count(*) FROM transmission_queue AS t
WHERE t.is_inbound AND t.conversation_handle = $conversation_handle
