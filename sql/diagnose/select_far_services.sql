-- The far services each database's conversations name (either side, not CLOSED): the
-- names a TRANSPORT route of that database is asked to carry (R10.6).
SELECT DISTINCT e.database_name, e.far_service
FROM sys.conversation_endpoints AS e
WHERE e.state_desc <> 'CLOSED'
ORDER BY e.database_name, e.far_service
