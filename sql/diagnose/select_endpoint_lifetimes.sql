-- The conversations each database routes (endpoints not CLOSED nor in ERROR, either side:
-- a target routes its replies), by far service and broker identifier, with how many and
-- until when the latest lives (C1 lifetime): what a route's LIFETIME is compared with.
SELECT e.database_name, e.far_service, e.far_broker_instance, count(*) AS endpoints,
    max(e.lifetime) AS latest
FROM sys.conversation_endpoints AS e
WHERE e.state_desc NOT IN ('CLOSED', 'ERROR')
GROUP BY e.database_name, e.far_service, e.far_broker_instance
ORDER BY e.database_name, e.far_service, e.far_broker_instance
