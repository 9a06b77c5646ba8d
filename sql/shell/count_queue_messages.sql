-- `pybroker queues`: how many messages each queue holds (C3), by status.
SELECT database_name, queue_name, count(*) FILTER (status_desc = 'READY') AS ready,
    count(*) AS messages
FROM sys.queue_messages
GROUP BY ALL
