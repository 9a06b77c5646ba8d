-- P4.4: the index RECEIVE reads a kept message's pieces through (select_message_piece.sql),
-- made inside its transaction and dropped before it commits (drop_piece_index.sql): a
-- lasting index on message_fragments made DuckDB 1.5.6 read the whole table back at
-- each commit that added fragments once it had been checkpointed (migrations/012). Made
-- in about 2 ms for 100 MB of pieces: it reads piece_id alone. IF NOT EXISTS: one left
-- by a RECEIVE that could not drop it is used, and dropped, by the next.
CREATE INDEX IF NOT EXISTS message_fragments_piece_id ON message_fragments (piece_id)
