-- 011: a large body SEND puts in the transmission queue is kept as pieces (P4.4, P5.2), each
-- smaller than DuckDB's 256 KiB block (pybroker/conversation/message_parts.py PIECE_SIZE),
-- written and committed a few MiB at a time before the SEND's own transaction writes its
-- row (pybroker/conversation/transmission_pieces.py): a 100 MB body inserted as one BLOB
-- in one transaction cost DuckDB three times its size in memory, and one it cannot evict.
-- body_pieces: how many pieces make the body (message_body is then NULL); NULL: the body
-- is in the row.
ALTER TABLE transmission_queue ADD COLUMN body_pieces INTEGER;

CREATE TABLE transmission_queue_pieces (
    conversation_handle      VARCHAR NOT NULL,   -- the sending endpoint
    message_sequence_number  BIGINT  NOT NULL,
    piece_number             INTEGER NOT NULL,   -- from 0, in the body's order
    message_body             BLOB,               -- this piece of the body
    PRIMARY KEY (conversation_handle, message_sequence_number, piece_number)
);
