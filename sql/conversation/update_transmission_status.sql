-- Why the messages of the endpoints in $conversation_handle (comma-joined) have not left (C4).
UPDATE transmission_queue SET transmission_status = $transmission_status
WHERE NOT is_inbound AND conversation_handle IN (SELECT UNNEST(string_split($conversation_handle, ',')))
