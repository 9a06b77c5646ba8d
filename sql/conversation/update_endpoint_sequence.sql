-- The sequence numbers of one conversation endpoint whose other columns did not change
-- (the single SEND of a transaction, P3, P5): plain bound values, half the cost of
-- update_endpoint_sequences.sql's encoded columns for one row.
UPDATE conversation_endpoints
SET send_sequence = $send_sequence,
    first_unacked_send_sequence = $first_unacked_send_sequence,
    receive_sequence = $receive_sequence
WHERE conversation_handle = $conversation_handle
