-- P4.4: the index of create_piece_index.sql, dropped before RECEIVE's transaction commits.
DROP INDEX IF EXISTS message_fragments_piece_id
