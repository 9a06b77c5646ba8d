-- 012: message_fragments (migrations/010) without its primary key, and so without a lasting
-- index, each piece numbered by piece_id instead. DuckDB 1.5.6 made each commit that added
-- rows to a table with an index, once the table had been checkpointed, read the whole
-- table back, BLOBs and all: with a 100 MB message's pieces arriving, every commit after
-- the first checkpoint grew the process by about the table's size again (bare DuckDB,
-- 1 MiB committed at a time: +72-166 MB a commit with any index on the table, +25-31 MB
-- without one). And a scan reads every BLOB of the vectors (2,048 rows) it passes,
-- whatever its filter, so reading some pieces by their other columns (or by rowid) held
-- all of them: only a lookup through an index fetches one row alone. So RECEIVE indexes
-- piece_id inside its own transaction while it reads a kept message back
-- (sql/wire/create_piece_index.sql, pybroker/conversation/message_parts.py), and drops the
-- index before it commits. Each fragment is still written once: the receiver's sequence
-- numbers drop a fragment it already holds before it is stored (P4.4).
CREATE SEQUENCE message_fragment_piece_ids;
CREATE TABLE message_fragments_unkeyed AS
SELECT *, nextval('message_fragment_piece_ids') AS piece_id
FROM message_fragments
ORDER BY conversation_handle, message_sequence_number, fragment_number, piece_number;
DROP TABLE message_fragments;
ALTER TABLE message_fragments_unkeyed RENAME TO message_fragments;
ALTER TABLE message_fragments ALTER COLUMN piece_id
    SET DEFAULT nextval('message_fragment_piece_ids');
ALTER TABLE message_fragments ALTER COLUMN database_id SET NOT NULL;
ALTER TABLE message_fragments ALTER COLUMN conversation_handle SET NOT NULL;
ALTER TABLE message_fragments ALTER COLUMN message_sequence_number SET NOT NULL;
ALTER TABLE message_fragments ALTER COLUMN fragment_number SET NOT NULL;
ALTER TABLE message_fragments ALTER COLUMN piece_number SET NOT NULL;
ALTER TABLE message_fragments ALTER COLUMN fragment_count SET NOT NULL;
ALTER TABLE message_fragments ALTER COLUMN message_size SET NOT NULL;
ALTER TABLE message_fragments ALTER COLUMN message_type_name SET NOT NULL;
ALTER TABLE message_fragments ALTER COLUMN validation SET NOT NULL;
ALTER TABLE message_fragments ALTER COLUMN is_end_of_dialog SET NOT NULL;
ALTER TABLE message_fragments ALTER COLUMN is_conversation_error SET NOT NULL;
ALTER TABLE message_fragments ALTER COLUMN arrival_time SET NOT NULL;
ALTER TABLE message_fragments ALTER COLUMN piece_id SET NOT NULL;
