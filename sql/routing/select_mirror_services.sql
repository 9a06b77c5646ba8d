{#-
  The services the live engine's mirror keeps (pybroker/core/routing/mirror.py; R2.6, R3.2, R4
  read them), with their database's identifier (the mirror adds the database's name and
  broker identifier): every service when $service_names is NULL, otherwise the services of
  those names in any database.
  Parameters: $service_names (a list of names, or NULL).
-#}
SELECT
    s.name,
    s.database_id
FROM services AS s
WHERE CAST($service_names AS VARCHAR[]) IS NULL
    OR list_contains(CAST($service_names AS VARCHAR[]), s.name)
