{#-
  `pybroker bench routing`: $route_count routes in database $database_id, covering every
  matching and choosing step. Route k (0-based) is, by k's share of $route_count:
    < 50 %  service svc_k, no broker identifier, a network address       (R2.2, R3.3)
    < 70 %  two routes per service naming two broker identifiers         (R2.3, R3.3)
    < 80 %  service svc_k with a mirror address                          (R3.1)
    < 90 %  service svc_k, LOCAL                                          (R3.2, R4)
    < 99.9% service svc_k, network address, expiring in a day             (R1.4)
    rest    wildcards with a network address                              (R2.5)
-#}
INSERT INTO routes (database_id, route_id, name, remote_service_name, broker_instance,
    lifetime, address, mirror_address, create_date)
SELECT
    $database_id,
    nextval('route_id_seq'),
    printf('BenchRoute%06d', g.k),
    CASE
        WHEN g.share >= 0.999 THEN NULL
        WHEN g.share >= 0.5 AND g.share < 0.7
            THEN printf('svc_%06d', CAST($route_count * 0.5 AS BIGINT) + (g.k - CAST($route_count * 0.5 AS BIGINT)) // 2)
        ELSE printf('svc_%06d', g.k)
    END,
    CASE WHEN g.share >= 0.5 AND g.share < 0.7 THEN
        lower(substr(md5('broker' || g.k::VARCHAR), 1, 8) || '-' || substr(md5('broker' || g.k::VARCHAR), 9, 4)
            || '-4' || substr(md5('broker' || g.k::VARCHAR), 14, 3) || '-8'
            || substr(md5('broker' || g.k::VARCHAR), 18, 3) || '-' || substr(md5('broker' || g.k::VARCHAR), 21, 12))
    END,
    CASE WHEN g.share >= 0.9 AND g.share < 0.999 THEN CAST($now AS TIMESTAMP) + INTERVAL 1 DAY END,
    CASE WHEN g.share >= 0.8 AND g.share < 0.9 THEN 'LOCAL'
        ELSE printf('tcp://host%03d.example.com:4022', g.k % 100) END,
    CASE WHEN g.share >= 0.7 AND g.share < 0.8
        THEN printf('tcp://mirror%03d.example.com:4022', g.k % 100) END,
    CAST($now AS TIMESTAMP)
FROM (
    SELECT r.range AS k, r.range / CAST($route_count AS DOUBLE) AS share
    FROM range(CAST($route_count AS BIGINT)) AS r
) AS g
