{#-
  pipeline resolve, stage 1: the epochs of a routing state. R1.4 is judged at each
  conversation's own begin_time, but a route is live exactly while lifetime > routed_at, so
  what a conversation sees changes only at the lifetime instants of the routes that can
  match it: the routes of its routing database that name its service, the wildcards (R2.5)
  and the routes to the dynamic routing service (R2.4, R8.1). Every begin_time in
  [routed_at, epoch_end) sees the same live routes as routed_at itself, so deciding once
  per (origin, service, broker identifier, epoch) replays history exactly while the
  routing steps run on few keys.

  Rows per routing database: with service_name NULL, the epochs every service sees (from
  the database-wide lifetimes); with a service_name, the epochs of a service that has
  expiring routes of its own (its lifetimes and the database-wide ones). The first epoch
  of each starts before every lifetime. Inputs: {{ routes }}, {{ databases }}.
-#}
WITH database_wide AS (
    SELECT DISTINCT r.database_id, r.lifetime
    FROM {{ routes }} AS r
    WHERE r.lifetime IS NOT NULL
        AND (r.remote_service_name IS NULL
            OR r.remote_service_name = 'SQL/ServiceBroker/BrokerConfiguration')
),
own_expiry AS (
    SELECT DISTINCT r.database_id, r.remote_service_name AS service_name
    FROM {{ routes }} AS r
    WHERE r.lifetime IS NOT NULL AND r.remote_service_name IS NOT NULL
),
instant AS (
    SELECT d.database_id, CAST(NULL AS VARCHAR) AS service_name,
        CAST('0001-01-01 00:00:00' AS TIMESTAMP) AS routed_at
    FROM {{ databases }} AS d
    UNION
    SELECT w.database_id, CAST(NULL AS VARCHAR) AS service_name, w.lifetime AS routed_at
    FROM database_wide AS w
    UNION
    SELECT o.database_id, o.service_name,
        CAST('0001-01-01 00:00:00' AS TIMESTAMP) AS routed_at
    FROM own_expiry AS o
    UNION
    SELECT r.database_id, r.remote_service_name AS service_name, r.lifetime AS routed_at
    FROM {{ routes }} AS r
    WHERE r.lifetime IS NOT NULL AND r.remote_service_name IS NOT NULL
    UNION
    SELECT o.database_id, o.service_name, w.lifetime AS routed_at
    FROM own_expiry AS o
    JOIN database_wide AS w ON w.database_id = o.database_id
)
SELECT
    i.database_id,
    i.service_name,
    i.routed_at,
    LEAD(i.routed_at) OVER (
        PARTITION BY i.database_id, i.service_name ORDER BY i.routed_at
    ) AS epoch_end
FROM instant AS i
