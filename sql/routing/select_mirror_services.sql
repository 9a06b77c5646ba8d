{#-
  The services the live engine's mirror keeps (pybroker/routing/mirror.py), each with its
  database (R2.6, R3.2, R4 read them): every service when $service_names is NULL, otherwise
  the services of those names in any database.
  Parameters: $service_names (a list of names, or NULL).
-#}
SELECT
    s.name,
    d.service_broker_guid,
    d.database_id,
    d.name AS database_name
FROM services AS s
JOIN databases AS d ON d.database_id = s.database_id
WHERE CAST($service_names AS VARCHAR[]) IS NULL
    OR list_contains(CAST($service_names AS VARCHAR[]), s.name)
