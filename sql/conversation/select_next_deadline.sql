-- When the delay/retry loop has something to do next (NULL: nothing scheduled).
SELECT MIN(LEAST(
    CASE WHEN e.state NOT IN ('ER', 'CD') THEN e.lifetime END,
    e.dialog_timer,
    e.transmission_next_attempt))
FROM conversation_endpoints AS e
