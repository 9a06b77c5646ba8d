-- 017: message_fragments as migrations 010 and 014 leave it on a new file (its pieces
-- keyed by conversation_handle, message_sequence_number, fragment_number, piece_number;
-- piece_id a number without default that may be NULL), whatever ran before. Two texts
-- that landed on main ran on some files and left it otherwise: 010 as it first landed
-- kept each fragment whole (no piece_number; the views of sql/catalog/ then fail on the
-- file), and 012 as it first landed (012_fragments_without_key) dropped the primary key and
-- made piece_id NOT NULL. The table is made again in today's form and its rows copied,
-- a whole fragment as its piece 0; the rebuild drops 015's index, which 018 makes again.
ALTER TABLE message_fragments ADD COLUMN IF NOT EXISTS piece_number INTEGER;
CREATE TABLE message_fragments_rebuilt (
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
    piece_id                 BIGINT,
    PRIMARY KEY (conversation_handle, message_sequence_number, fragment_number, piece_number)
);
INSERT INTO message_fragments_rebuilt
SELECT database_id, conversation_handle, message_sequence_number, fragment_number,
    coalesce(piece_number, 0), fragment_count, message_size, message_type_name, validation,
    is_end_of_dialog, is_conversation_error, message_body, arrival_time, piece_id
FROM message_fragments;
DROP TABLE message_fragments;
ALTER TABLE message_fragments_rebuilt RENAME TO message_fragments;
