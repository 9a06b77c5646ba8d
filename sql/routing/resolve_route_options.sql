{#-
  Every possible route decision for each conversation key, with its probability.

  The live engine runs this once for many keys and samples from the answer per call
  (R2.3, R3 and R4.2 picks stay random per conversation); the pipeline and the parity
  tests use it because it is deterministic. Columns: see README "Route decisions".
-#}
WITH
{% include 'routing/_route_steps.sql' %}
SELECT
    o.origin,
    o.service_name,
    CASE WHEN o.broker_key = '' THEN NULL ELSE o.broker_key END AS broker_instance,
    o.routed_at,
    o.pick_group,
    o.outcome,
    o.route_name,
    o.address,
    o.mirror_address,
    o.database_name,
    o.decision_broker_instance,
    'R2.' || CAST(o.match_order AS VARCHAR) AS match_step,
    CASE WHEN o.choose_order IS NOT NULL THEN 'R3.' || CAST(o.choose_order AS VARCHAR) END
        AS choose_step,
    o.locate_step,
    o.decided_by,
    o.weight
FROM route_option AS o
ORDER BY o.origin, o.service_name, o.broker_key, o.routed_at, o.pick_group,
    o.outcome, o.route_name, o.database_name
