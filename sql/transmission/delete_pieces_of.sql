-- The pieces of every message of the endpoints in $conversation_handle (comma-joined)
-- leave with their rows (conversation/delete_transmission_queue_of.sql).
DELETE FROM transmission_queue_pieces
WHERE conversation_handle IN (SELECT UNNEST(string_split($conversation_handle, ',')))
