-- P4.4: one fragment of a message kept as its fragments (queue_messages.body_fragments), as
-- RECEIVE reads the body back: one statement per fragment, so DuckDB holds one fragment at
-- a time (a scan of them all hands every body over at once).
SELECT f.message_size, f.message_body
FROM message_fragments AS f
WHERE f.conversation_handle = $conversation_handle
    AND f.message_sequence_number = $message_sequence_number
    AND f.fragment_number = $fragment_number
