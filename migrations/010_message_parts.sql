-- 010: a message that crossed the wire in fragments stays as its fragments (P4.4). Once the
-- last one arrives, the queue row holds no body and says how many fragments make it: they
-- stay in message_fragments (same conversation_handle and message_sequence_number) until
-- RECEIVE takes the message, its conversation ends or its queue is dropped. RECEIVE reads
-- them back a few at a time, so a large body never sits in DuckDB as one value (whose
-- insert and read back cost three to four times its size in memory). NULL: the body is in
-- the row.
ALTER TABLE queue_messages ADD COLUMN body_fragments INTEGER;

-- Each fragment is kept as pieces smaller than DuckDB's 256 KiB block (piece_number from
-- 0, pybroker/conversation/message_parts.py PIECE_SIZE): DuckDB 1.5 cannot evict a value
-- of a block or more, so fragments of 1 MiB beyond the memory limit made a commit fail
-- and the file unusable until reopened. Rows of before this migration become piece 0.
CREATE TABLE message_fragment_pieces (
    database_id              INTEGER   NOT NULL,
    conversation_handle      VARCHAR   NOT NULL,   -- the receiving endpoint
    message_sequence_number  BIGINT    NOT NULL,
    fragment_number          INTEGER   NOT NULL,
    piece_number             INTEGER   NOT NULL,
    fragment_count           INTEGER   NOT NULL,
    message_size             BIGINT    NOT NULL,
    message_type_name        VARCHAR   NOT NULL,
    validation               VARCHAR   NOT NULL,
    is_end_of_dialog         BOOLEAN   NOT NULL,
    is_conversation_error    BOOLEAN   NOT NULL,
    message_body             BLOB,                 -- this piece of the fragment's body
    arrival_time             TIMESTAMP NOT NULL,
    PRIMARY KEY (conversation_handle, message_sequence_number, fragment_number, piece_number)
);
INSERT INTO message_fragment_pieces
SELECT database_id, conversation_handle, message_sequence_number, fragment_number, 0,
    fragment_count, message_size, message_type_name, validation, is_end_of_dialog,
    is_conversation_error, message_body, arrival_time
FROM message_fragments;
DROP TABLE message_fragments;
ALTER TABLE message_fragment_pieces RENAME TO message_fragments;
