-- P4.4: the bodies of a run of pieces kept in message_fragments whose piece_ids follow one
-- another (the pieces of one fragment, insert_message_fragment_pieces.sql), in order, each
-- with its piece_id so that the reader sees one is missing. A range is a scan, not a
-- lookup through the index: it reads the BLOBs of the vectors (2,048 rows) it passes, so
-- it is used only for pieces of message_parts.PIECE_SIZE (a vector of them is 16 MiB);
-- larger pieces, kept by an earlier version, are read one each (select_message_piece.sql).
SELECT f.piece_id, f.message_body
FROM message_fragments AS f
WHERE f.piece_id BETWEEN $first_piece_id AND $last_piece_id
ORDER BY f.piece_id
