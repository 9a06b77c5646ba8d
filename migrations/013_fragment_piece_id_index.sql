-- 013: the index of message_fragments.piece_id (migrations/012), through which RECEIVE
-- reads a kept body back one piece at a time (sql/wire/select_message_piece.sql).
CREATE UNIQUE INDEX message_fragments_piece_id ON message_fragments (piece_id);
