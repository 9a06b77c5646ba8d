{#-
  The routes the live engine's mirror keeps (pybroker/routing/mirror.py), with the name of
  their database: every route when $database_names is NULL (the first load, or after a
  change that says nothing more precise); otherwise the routes of those databases that name
  a service of $service_names (NULL: any service) or, when $wildcards, no service (R2.5).
  Expired routes come too: the mirror leaves them out of each decision by its own routed_at,
  as select_key_inputs.sql does (R1.4).
  Parameters: $database_names, $service_names (lists of names, or NULL), $wildcards.
-#}
SELECT
    d.name AS database_name,
    r.remote_service_name AS service_name,
    r.name,
    r.broker_instance,
    r.address,
    r.mirror_address,
    r.lifetime
FROM routes AS r
JOIN databases AS d ON d.database_id = r.database_id
WHERE (CAST($database_names AS VARCHAR[]) IS NULL
        OR list_contains(CAST($database_names AS VARCHAR[]), d.name))
    AND (CAST($service_names AS VARCHAR[]) IS NULL
        OR list_contains(CAST($service_names AS VARCHAR[]), r.remote_service_name)
        OR (CAST($wildcards AS BOOLEAN) AND r.remote_service_name IS NULL))
