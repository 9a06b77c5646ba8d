-- DROP QUEUE: its contents go with it.
DELETE FROM queue_messages WHERE database_id = $database_id AND queue_name = $queue_name
