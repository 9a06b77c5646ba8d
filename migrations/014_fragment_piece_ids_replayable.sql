-- supersedes: 012
-- 014: every piece of a fragment kept in message_fragments (migrations/010) has a number of
-- its own, piece_id, by which RECEIVE reads a body kept as its fragments back one piece
-- per statement (sql/wire/select_message_piece.sql; why a number: 012's header). 012 did
-- this with ADD COLUMN ... DEFAULT nextval(...), a form DuckDB 1.5.6 cannot replay from its
-- write-ahead log: a process killed between that commit and the next checkpoint left a
-- file that never opened again. This migration reaches 012's end by forms that replay
-- (each checked by tests/test_crash_replay.py), from a file at 011 or from one that ran
-- 012 (whose column keeps its values): the column has no default, and each INSERT gives
-- its rows their numbers (sql/wire/insert_message_fragment_pieces.sql). A file that has
-- not run 012 never runs it.
CREATE SEQUENCE IF NOT EXISTS message_fragment_piece_ids;
ALTER TABLE message_fragments ADD COLUMN IF NOT EXISTS piece_id BIGINT;
ALTER TABLE message_fragments ALTER COLUMN piece_id DROP DEFAULT;
UPDATE message_fragments SET piece_id = nextval('message_fragment_piece_ids')
WHERE piece_id IS NULL;
