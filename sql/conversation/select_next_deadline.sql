-- When the delay/retry loop has something to do next (NULL: nothing scheduled): a lifetime,
-- a timer or a retry of an endpoint, or the end of the time-out after an answered route
-- request (R8.2).
SELECT MIN(t.due) FROM (
    SELECT LEAST(
        CASE WHEN e.state NOT IN ('ER', 'CD') THEN e.lifetime END,
        e.dialog_timer,
        e.transmission_next_attempt) AS due
    FROM conversation_endpoints AS e
    UNION ALL
    SELECT q.retry_at AS due
    FROM route_request_dialogs AS q
) AS t
