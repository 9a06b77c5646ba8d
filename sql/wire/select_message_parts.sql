-- P4.4: fragments $first_fragment up to (not including) $end_fragment of a message kept as
-- its fragments (queue_messages.body_fragments), piece by piece in order, as RECEIVE reads
-- the body back a few MiB per statement: a scan of all of them hands every body over at
-- once, and a statement per fragment costs ten times as long once DuckDB has checkpointed
-- them in this process.
SELECT f.fragment_number, f.piece_number, f.message_size, f.message_body
FROM message_fragments AS f
WHERE f.conversation_handle = $conversation_handle
    AND f.message_sequence_number = $message_sequence_number
    AND f.fragment_number >= $first_fragment AND f.fragment_number < $end_fragment
ORDER BY f.fragment_number, f.piece_number
