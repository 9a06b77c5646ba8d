{#-
  pipeline impact: the changed conversations counted per service and route: how many move
  from which route/outcome to which, and what kind of change it is (a conversation that
  becomes DELAYED waits in its transmission queue, R2.7/R3.5; a message from outside that
  becomes dropped is retried by its sender, R3.5/R3.6). Input: {{ changes }}.
-#}
SELECT
    ch.service_name,
    ch.before_outcome,
    ch.before_route,
    ch.after_outcome,
    ch.after_route,
    CASE
        WHEN ch.after_outcome = 'delay' THEN 'becomes DELAYED'
        WHEN ch.after_outcome = 'drop' THEN 'becomes dropped'
        WHEN ch.before_outcome = 'delay' THEN 'no longer DELAYED'
        WHEN ch.before_outcome = 'drop' THEN 'no longer dropped'
        WHEN ch.after_outcome IS NULL OR ch.before_outcome IS NULL THEN 'undecided'
        ELSE 'moves'
    END AS change,
    COUNT(*) AS conversations
FROM {{ changes }} AS ch
GROUP BY ch.service_name, ch.before_outcome, ch.before_route, ch.after_outcome, ch.after_route
