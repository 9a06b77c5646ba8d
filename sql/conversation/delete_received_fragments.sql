-- RECEIVE, at commit (C3): the fragments of the messages taken that were kept as their
-- fragments (migrations/010) leave with them, one statement for the whole transaction.
-- $conversation_handle and $message_sequence_number are comma-joined, pairwise
-- (pybroker/conversation/columns.py).
DELETE FROM message_fragments AS f
USING (
    SELECT UNNEST(string_split($conversation_handle, ',')) AS conversation_handle,
        CAST(UNNEST(string_split($message_sequence_number, ',')) AS BIGINT)
            AS message_sequence_number
) AS t
WHERE f.conversation_handle = t.conversation_handle
    AND f.message_sequence_number = t.message_sequence_number
