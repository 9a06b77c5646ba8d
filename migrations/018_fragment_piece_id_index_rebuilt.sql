-- 018: the index of message_fragments.piece_id (015's), made again on the table 017 rebuilt:
-- a migration of its own, as 015 is.
CREATE UNIQUE INDEX IF NOT EXISTS message_fragments_piece_id ON message_fragments (piece_id);
