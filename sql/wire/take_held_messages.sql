-- Whole messages held with status 2 (they arrived out of order) are next in sequence now:
-- one conversation endpoint's $message_sequence_number list, comma-joined as
-- pybroker/core/conversation/columns.py encodes integers.
DELETE FROM queue_messages
WHERE conversation_handle = $conversation_handle AND status = 2
    AND message_sequence_number IN (
        SELECT CAST(UNNEST(string_split($message_sequence_number, ',')) AS BIGINT))
RETURNING message_sequence_number, validation, message_body
