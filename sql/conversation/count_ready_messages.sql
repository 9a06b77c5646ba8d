-- Whether a queue holds a message ready to receive (WAITFOR (RECEIVE) polls this).
SELECT COUNT(*) FROM queue_messages AS m
WHERE m.database_id = $database_id AND m.queue_name = $queue_name AND m.status = 1
