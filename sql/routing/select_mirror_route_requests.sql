{#-
  The route requests the live engine's mirror keeps (pybroker/core/routing/mirror.py; R2.4 skips
  the dynamic routing service while one is pending), with their database's identifier:
  every request when $database_ids is NULL, otherwise those of these databases for a
  service of $service_names (NULL: any service).
  Parameters: $database_ids (a list of identifiers, or NULL), $service_names (a list of
  names, or NULL).
-#}
SELECT
    q.database_id,
    q.service_name
FROM route_requests AS q
WHERE (CAST($database_ids AS INTEGER[]) IS NULL
        OR list_contains(CAST($database_ids AS INTEGER[]), q.database_id))
    AND (CAST($service_names AS VARCHAR[]) IS NULL
        OR list_contains(CAST($service_names AS VARCHAR[]), q.service_name))
