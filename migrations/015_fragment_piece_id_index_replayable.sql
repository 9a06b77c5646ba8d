-- supersedes: 013
-- 015: the index of message_fragments.piece_id (migrations/014), through which RECEIVE reads
-- a kept body back one piece at a time. A migration of its own: DuckDB 1.5.6 refuses to
-- index, in the transaction that added it, a column added to a table that has rows. 013
-- made the same index without IF NOT EXISTS, which fails on a file whose 012 (as 012
-- first landed) made it already; this one reaches the same end from 011, 012 or 013.
CREATE UNIQUE INDEX IF NOT EXISTS message_fragments_piece_id ON message_fragments (piece_id);
