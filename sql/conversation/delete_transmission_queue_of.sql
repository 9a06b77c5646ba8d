-- Rows of the transmission queue of the endpoints in $conversation_handle (comma-joined):
-- acknowledged (delivered), or their conversation ended with an error or cleanup (C4).
DELETE FROM transmission_queue
WHERE NOT is_inbound AND conversation_handle IN (SELECT UNNEST(string_split($conversation_handle, ',')))
