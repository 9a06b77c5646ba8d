-- RECEIVE, at commit (C3): the fragments of the messages taken that were kept as their
-- fragments (migrations/010) leave with them, one statement for the whole transaction.
-- $conversation_handle and $message_sequence_number are comma-joined, pairwise
-- (pybroker/core/conversation/columns.py).
DELETE FROM message_fragments AS f
USING {% include 'conversation/_message_pairs.sql' %} AS t
WHERE f.conversation_handle = t.conversation_handle
    AND f.message_sequence_number = t.message_sequence_number
