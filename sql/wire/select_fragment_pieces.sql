-- The last fragment arrived: the length of each piece of the others (without their bodies),
-- so that each piece read by wire/select_message_fragments.sql, in whatever order, is put
-- at its place: pieces follow one another within their fragment, whatever size they were
-- cut to (pybroker/kernel/messaging/message_parts.py PIECE_SIZE, which has changed).
SELECT f.fragment_number, f.piece_number, octet_length(f.message_body)
FROM message_fragments AS f
WHERE f.conversation_handle = $conversation_handle
    AND f.message_sequence_number = $message_sequence_number
