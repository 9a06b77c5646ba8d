{#-
  pipeline resolve, stage 2: each conversation with its routing key: broker identifiers in
  lower case (as the live engine normalizes them) and routed_at = the start of the epoch
  its begin_time falls in (route_epochs.sql). A conversation with no begin_time keeps a
  NULL routed_at and gets no decision. Inputs: {{ conversations }}, {{ epochs }} (small).
-#}
SELECT
    c.conversation_id,
    c.origin,
    c.service_name,
    lower(c.broker_instance) AS broker_instance,
    e.routed_at
FROM {{ conversations }} AS c
LEFT JOIN {{ epochs }} AS e
    ON c.begin_time >= e.routed_at AND (e.epoch_end IS NULL OR c.begin_time < e.epoch_end)
