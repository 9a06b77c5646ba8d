-- P5.2: the pieces of the messages the far side acknowledged leave with their rows
-- (wire/delete_acknowledged.sql, the same pairs, comma-joined as columns.py encodes).
DELETE FROM transmission_queue_pieces AS p
USING (
    SELECT UNNEST(string_split($conversation_handle, ',')) AS conversation_handle,
        CAST(UNNEST(string_split($message_sequence_number, ',')) AS BIGINT)
            AS message_sequence_number
) AS a
WHERE p.conversation_handle = a.conversation_handle
    AND p.message_sequence_number = a.message_sequence_number
