{#-
  The route requests the live engine's mirror keeps (pybroker/routing/mirror.py; R2.4 skips
  the dynamic routing service while one is pending), with the name of their database: every
  request when $database_names is NULL, otherwise those of these databases for a service of
  $service_names (NULL: any service).
  Parameters: $database_names, $service_names (lists of names, or NULL).
-#}
SELECT
    d.name AS database_name,
    q.service_name
FROM route_requests AS q
JOIN databases AS d ON d.database_id = q.database_id
WHERE (CAST($database_names AS VARCHAR[]) IS NULL
        OR list_contains(CAST($database_names AS VARCHAR[]), d.name))
    AND (CAST($service_names AS VARCHAR[]) IS NULL
        OR list_contains(CAST($service_names AS VARCHAR[]), q.service_name))
