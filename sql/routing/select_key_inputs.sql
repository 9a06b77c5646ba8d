{#-
  Everything the decision of one conversation key reads (the list in
  pybroker/core/routing/cache.py), for the live engine's point path: pybroker/core/routing/point.py
  applies the steps of _route_steps.sql to these rows. One row per input, by kind:
    'route'      a live route of the routing database (R1.1, R1.2; R1.4: expired routes
                 left out) that names the service (R2.1-R2.3), the dynamic routing
                 service (R2.4, R8.1), or no service (R2.5)
    'request'    a route request of the routing database for the service (R2.4)
    'service'    a service of that name and its database (R2.6, R3.2, R4)
    'origin'     the database the conversation was begun in (R4.2 looks there first)
    'forwarding' the forwarding setting (R3.6)
  Parameters: $origin (a database name or 'outside'), $service_name, $routed_at.
-#}
WITH routing_database AS (
    SELECT d.database_id
    FROM databases AS d
    WHERE d.name = CASE WHEN CAST($origin AS VARCHAR) = 'outside' THEN 'msdb'
        ELSE CAST($origin AS VARCHAR) END
)
SELECT
    'route' AS kind,
    r.name,
    r.remote_service_name AS service_name,
    r.broker_instance,
    r.address,
    r.mirror_address,
    CAST(NULL AS INTEGER) AS database_id,
    CAST(NULL AS VARCHAR) AS database_name,
    CAST(NULL AS BOOLEAN) AS is_forwarding_enabled
FROM routes AS r
JOIN routing_database AS k ON k.database_id = r.database_id
WHERE (r.lifetime IS NULL OR r.lifetime > CAST($routed_at AS TIMESTAMP))
    AND (r.remote_service_name IS NULL
        OR r.remote_service_name = CAST($service_name AS VARCHAR)
        OR r.remote_service_name = 'SQL/ServiceBroker/BrokerConfiguration')
UNION ALL
SELECT
    'request' AS kind, NULL, q.service_name, NULL, NULL, NULL, NULL, NULL, NULL
FROM route_requests AS q
JOIN routing_database AS k ON k.database_id = q.database_id
WHERE q.service_name = CAST($service_name AS VARCHAR)
UNION ALL
SELECT
    'service' AS kind, NULL, s.name, d.service_broker_guid, NULL, NULL, d.database_id, d.name,
    NULL
FROM services AS s
JOIN databases AS d ON d.database_id = s.database_id
WHERE s.name = CAST($service_name AS VARCHAR)
UNION ALL
SELECT
    'origin' AS kind, NULL, NULL, NULL, NULL, NULL, d.database_id, d.name, NULL
FROM databases AS d
WHERE d.name = CAST($origin AS VARCHAR) AND CAST($origin AS VARCHAR) <> 'outside'
UNION ALL
SELECT
    'forwarding' AS kind, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
    BOOL_OR(f.is_forwarding_enabled)
FROM instance_settings AS f
