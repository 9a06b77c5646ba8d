{#-
  The routes the live engine's mirror keeps (pybroker/core/routing/mirror.py), with their
  database's identifier: every route when $database_ids is NULL (the first load, or after a
  change that says nothing more precise); otherwise the routes of those databases that name
  a service of $service_names (NULL: any service) or, when $wildcards, no service (R2.5).
  Expired routes come too: the mirror leaves them out of each decision by its own routed_at,
  as select_key_inputs.sql does (R1.4). No join: the mirror knows the databases, and a
  statement this small is mostly DuckDB's fixed cost.
  Parameters: $database_ids (a list of identifiers, or NULL), $service_names (a list of
  names, or NULL), $wildcards.
-#}
SELECT
    r.database_id,
    r.remote_service_name AS service_name,
    r.name,
    r.broker_instance,
    r.address,
    r.mirror_address,
    r.lifetime
FROM routes AS r
WHERE (CAST($database_ids AS INTEGER[]) IS NULL
        OR list_contains(CAST($database_ids AS INTEGER[]), r.database_id))
    AND (CAST($service_names AS VARCHAR[]) IS NULL
        OR list_contains(CAST($service_names AS VARCHAR[]), r.remote_service_name)
        OR (CAST($wildcards AS BOOLEAN) AND r.remote_service_name IS NULL))
