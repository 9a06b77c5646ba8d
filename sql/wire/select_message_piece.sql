-- P4.4: the body of one piece of a fragment kept in message_fragments, by its piece_id:
-- through the index RECEIVE made for its read (create_piece_index.sql), which fetches
-- that one row's BLOB and not those of its neighbours (migrations/012).
SELECT f.message_body
FROM message_fragments AS f
WHERE f.piece_id = $piece_id
