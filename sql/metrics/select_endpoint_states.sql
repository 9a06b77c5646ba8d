-- /metrics: conversation endpoints of each database by state (C1's two-letter codes)
SELECT d.name AS database_name, e.state, count(*) AS endpoints
FROM main.conversation_endpoints AS e
JOIN main.databases AS d ON d.database_id = e.database_id
GROUP BY ALL
ORDER BY ALL
