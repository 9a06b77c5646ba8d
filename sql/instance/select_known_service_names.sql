-- Every service name the catalog mentions: in a route of any database, as a service, or in
-- a pending route request. Routing decides any other name like every other such name.
SELECT r.remote_service_name AS service_name FROM routes AS r
WHERE r.remote_service_name IS NOT NULL
UNION
SELECT s.name FROM services AS s
UNION
SELECT q.service_name FROM route_requests AS q
