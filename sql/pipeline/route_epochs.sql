{#-
  pipeline resolve, stage 1: the epochs of a routing state. R1.4 is judged at each
  conversation's own begin_time, but a route is live exactly while lifetime > routed_at, so
  the set of live routes changes only at the routes' lifetime instants: every begin_time in
  [routed_at, epoch_end) sees the same live routes as routed_at itself. Deciding once per
  (origin, service, broker identifier, epoch) instead of once per conversation keeps the
  routing steps on the few distinct keys. The first epoch starts before every lifetime.
  Input: {{ routes }}.
-#}
SELECT
    e.routed_at,
    LEAD(e.routed_at) OVER (ORDER BY e.routed_at) AS epoch_end
FROM (
    SELECT CAST('0001-01-01 00:00:00' AS TIMESTAMP) AS routed_at
    UNION
    SELECT r.lifetime AS routed_at FROM {{ routes }} AS r WHERE r.lifetime IS NOT NULL
) AS e
