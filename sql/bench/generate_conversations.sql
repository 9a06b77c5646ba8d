{#-
  `pybroker bench routing`: $conversation_count conversations decided at one instant.
  Services are skewed (a square of a uniform draw favours low numbers) over 110 % of the
  route count, so some services have no route of their own (wildcards, R2.5); 5 % name a
  broker identifier; 10 % arrive from outside (msdb's table).
-#}
CREATE OR REPLACE TEMP TABLE bench_conversations AS
SELECT
    r.range AS conversation_id,
    CASE WHEN r.range % 10 = 9 THEN 'outside' ELSE $origin END AS origin,
    printf('svc_%06d', CAST(floor(pow(hash(r.range) / 18446744073709551616.0, 2)
        * $route_count * 1.1) AS BIGINT)) AS service_name,
    CASE WHEN r.range % 20 = 3 THEN $broker_instance END AS broker_instance,
    CAST($now AS TIMESTAMP) AS routed_at
FROM range(CAST($conversation_count AS BIGINT)) AS r
