-- 010: a message that crossed the wire in fragments stays as its fragments (P4.4). Once the
-- last one arrives, the queue row holds no body and says how many fragments make it: they
-- stay in message_fragments (same conversation_handle and message_sequence_number) until
-- RECEIVE takes the message, its conversation ends or its queue is dropped. RECEIVE reads
-- them back one at a time, so a large body never sits in DuckDB as one value (whose insert
-- and read back cost three to four times its size in memory). NULL: the body is in the row.
ALTER TABLE queue_messages ADD COLUMN body_fragments INTEGER;
