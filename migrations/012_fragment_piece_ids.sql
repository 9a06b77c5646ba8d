-- 012: every piece of a fragment kept in message_fragments (migrations/010) gets a number
-- of its own, with an index, so that RECEIVE reads a body kept as its fragments back one
-- piece per statement by that number (sql/wire/select_message_piece.sql). DuckDB 1.5.6
-- reads a BLOB column a vector (2,048 rows) at a time, every value in it, whatever the
-- filter: a statement reading 8 MiB of a 100 MB body's pieces by (conversation_handle,
-- message_sequence_number, fragment_number) held the whole 100 MB meanwhile, as did a
-- lookup by rowid or by the four columns of the primary key. A lookup through a
-- one-column index fetches that row alone (bare DuckDB, 100 MB of 127 KiB pieces under a
-- memory limit of 80 MiB: peak growth 87 MB instead of 185-217 MB). The primary key
-- stays: without an index on the table, DuckDB 1.5.6 rewrites the table's last row group
-- whole at each checkpoint, and pieces of about 1.5 times the memory limit made a
-- checkpoint fail, and the file with it. Rows of before this migration are numbered here;
-- the index is made by migration 013 (DuckDB 1.5.6 refuses to index, in the transaction
-- that added it, a column added to a table that has rows).
CREATE SEQUENCE message_fragment_piece_ids;
ALTER TABLE message_fragments ADD COLUMN piece_id BIGINT
    DEFAULT nextval('message_fragment_piece_ids');
