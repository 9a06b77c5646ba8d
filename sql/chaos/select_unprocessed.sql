-- Messages a chaos run's receiving workers have still to take from their queue (ready or
-- not: a message held with status 2 is taken once it is released).
SELECT count(*) AS unprocessed
FROM main.queue_messages
WHERE queue_name = $queue
