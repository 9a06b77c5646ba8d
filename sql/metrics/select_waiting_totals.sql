-- serve's summary line: ready messages in every queue, and messages in every transmission
-- queue
SELECT (SELECT count(*) FROM main.queue_messages WHERE status = 1) AS ready,
    (SELECT count(*) FROM main.transmission_queue) AS transmission
