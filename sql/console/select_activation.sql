-- the console's activation: each queue monitor, and the readers running now (C3)
SELECT m.database_name, m.queue_name, m.state, m.tasks_waiting, m.last_activated_time,
    count(t.spid) AS readers
FROM sys.dm_broker_queue_monitors AS m
LEFT JOIN sys.dm_broker_activated_tasks AS t
    ON t.database_id = m.database_id AND t.queue_name = m.queue_name
GROUP BY ALL
ORDER BY m.database_name, m.queue_name
