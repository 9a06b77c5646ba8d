-- What the delay/retry loop has to do at $now: lifetimes passed (C2 -8489), timers due
-- (DialogTimer), transmissions to retry (C5). $retry_all: every waiting transmission now
-- (after a catalog change).
SELECT e.conversation_handle,
    e.lifetime <= $now AND e.state NOT IN ('ER', 'CD') AS is_expired,
    COALESCE(e.dialog_timer <= $now, FALSE) AS is_timer_due,
    COALESCE(e.transmission_next_attempt <= $now
        OR ($retry_all AND e.transmission_next_attempt IS NOT NULL), FALSE) AS is_retry_due
FROM conversation_endpoints AS e
WHERE (e.lifetime <= $now AND e.state NOT IN ('ER', 'CD'))
    OR e.dialog_timer <= $now
    OR e.transmission_next_attempt <= $now
    OR ($retry_all AND e.transmission_next_attempt IS NOT NULL)
ORDER BY e.create_date, e.conversation_handle
