{#-
  pipeline traffic: conversation endpoints (C1) per database, service, far service and
  state: how many, and how many of them this side began.
  Inputs: {{ conversation_endpoints }}, {{ databases }}.
-#}
SELECT
    d.name AS database_name,
    e.service_name,
    e.far_service,
    e.state,
    COUNT(*) AS endpoints,
    SUM(CASE WHEN e.is_initiator THEN 1 ELSE 0 END) AS initiated_here
FROM {{ conversation_endpoints }} AS e
JOIN {{ databases }} AS d ON d.database_id = e.database_id
GROUP BY d.name, e.service_name, e.far_service, e.state
