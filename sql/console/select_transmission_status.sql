-- the console's transmission queue: messages waiting, grouped by why (C4:
-- transmission_status is '' while nothing went wrong)
SELECT database_name, to_service_name, transmission_status, count(*) AS messages,
    min(enqueue_time) AS oldest
FROM sys.transmission_queue
GROUP BY ALL
ORDER BY messages DESC, database_name, to_service_name
