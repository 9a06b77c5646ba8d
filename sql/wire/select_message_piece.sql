-- P4.4: the body of one piece of a fragment kept in message_fragments, by its piece_id:
-- through that column's index (migrations/013), which fetches this one row's BLOB and
-- not those of its neighbours.
SELECT f.message_body
FROM message_fragments AS f
WHERE f.piece_id = $piece_id
