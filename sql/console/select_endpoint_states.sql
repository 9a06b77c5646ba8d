-- the console's conversations: endpoints of each database by state
SELECT database_name, state_desc, count(*) AS endpoints
FROM sys.conversation_endpoints
GROUP BY ALL
ORDER BY ALL
