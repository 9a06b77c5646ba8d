-- What a forwarder's file holds of the dialogs it passed on, one row per relation: all 0,
-- since a forwarder keeps forwarded messages in memory only (R7.3).
SELECT 'sys.conversation_endpoints' AS relation, count(*) AS held
FROM sys.conversation_endpoints
UNION ALL
SELECT 'main.message_fragments', count(*) FROM main.message_fragments
UNION ALL
SELECT 'main.queue_messages', count(*) FROM main.queue_messages
UNION ALL
SELECT 'sys.transmission_queue', count(*) FROM sys.transmission_queue
