-- C3: which messages the endpoints in $conversation_handle (comma-joined) sent are kept in
-- their own queue (status 3, retained sent), by sequence number.
SELECT m.conversation_handle, m.message_sequence_number
FROM queue_messages AS m
WHERE m.status = 3
    AND m.conversation_handle IN (SELECT UNNEST(string_split($conversation_handle, ',')))
