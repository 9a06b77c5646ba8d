-- as one query
SELECT
  ch.service_name,
  ch.before_outcome,
  ch.before_route,
  ch.after_outcome,
  ch.after_route,
  CASE
    WHEN ch.after_outcome = 'delay'
    THEN 'becomes DELAYED'
    WHEN ch.after_outcome = 'drop'
    THEN 'becomes dropped'
    WHEN ch.before_outcome = 'delay'
    THEN 'no longer DELAYED'
    WHEN ch.before_outcome = 'drop'
    THEN 'no longer dropped'
    WHEN ch.after_outcome IS NULL OR ch.before_outcome IS NULL
    THEN 'undecided'
    ELSE 'moves'
  END AS change,
  COUNT(*) AS conversations
FROM changes AS ch
GROUP BY
  ch.service_name,
  ch.before_outcome,
  ch.before_route,
  ch.after_outcome,
  ch.after_route

-- final query
SELECT
  ch.service_name,
  ch.before_outcome,
  ch.before_route,
  ch.after_outcome,
  ch.after_route,
  CASE
    WHEN ch.after_outcome = 'delay'
    THEN 'becomes DELAYED'
    WHEN ch.after_outcome = 'drop'
    THEN 'becomes dropped'
    WHEN ch.before_outcome = 'delay'
    THEN 'no longer DELAYED'
    WHEN ch.before_outcome = 'drop'
    THEN 'no longer dropped'
    WHEN ch.after_outcome IS NULL OR ch.before_outcome IS NULL
    THEN 'undecided'
    ELSE 'moves'
  END AS change,
  COUNT(*) AS conversations
FROM changes AS ch
GROUP BY
  ch.service_name,
  ch.before_outcome,
  ch.before_route,
  ch.after_outcome,
  ch.after_route
