-- One queue's rows as a chaos run's checker reads them, in queuing order: the receiving
-- queue (what the instance committed and no worker took) or the record queue (what the
-- workers processed, one record a message).
SELECT conversation_handle, queuing_order, message_sequence_number, status, message_body,
       body_fragments
FROM main.queue_messages
WHERE queue_name = $queue
ORDER BY queuing_order
