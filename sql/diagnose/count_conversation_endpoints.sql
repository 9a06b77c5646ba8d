-- Conversation endpoints by database and state (C1), and how many of them were created
-- before $created_before (the leak threshold diagnose was given).
SELECT e.database_name, e.state_desc, count(*) AS endpoints,
    count(*) FILTER (WHERE e.create_date < $created_before) AS older
FROM sys.conversation_endpoints AS e
GROUP BY e.database_name, e.state_desc
ORDER BY e.database_name, e.state_desc
