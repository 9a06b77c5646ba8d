-- /metrics: messages waiting in each database's transmission queue, by the service they go
-- to and by whether the last attempt left a transmission_status ('' while nothing went wrong,
-- C4)
SELECT d.name AS database_name, t.to_service_name,
    CASE WHEN t.transmission_status = '' THEN 'waiting' ELSE 'failing' END AS status_class,
    count(*) AS messages
FROM main.transmission_queue AS t
JOIN main.databases AS d ON d.database_id = t.database_id
GROUP BY ALL
ORDER BY ALL
