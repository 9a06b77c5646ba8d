-- P4.4: the pieces of a message kept as its fragments (queue_messages.body_fragments), in
-- order, each with its piece_id and without its body: RECEIVE then reads the bodies by
-- piece_id, a run of them at a time (select_message_pieces.sql). Not the bodies here:
-- DuckDB reads every BLOB of the vectors a scan passes (2,048 rows), so a filter on these
-- columns would hold all of them at once, the whole table's pieces in the worst case
-- (migrations/012).
SELECT f.piece_id, f.fragment_number, f.piece_number, f.message_size
FROM message_fragments AS f
WHERE f.conversation_handle = $conversation_handle
    AND f.message_sequence_number = $message_sequence_number
ORDER BY f.fragment_number, f.piece_number
