-- The conversation a handle (either side's) or a conversation_id names (C1): trace follows
-- it by its conversation_id, which both sides share.
SELECT DISTINCT e.conversation_id
FROM sys.conversation_endpoints AS e
WHERE e.conversation_handle = lower($handle) OR e.conversation_id = lower($handle)
