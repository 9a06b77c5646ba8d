{#-
  The routing process traced for each conversation key: one row per matching step (R2.1-
  R2.7) and choosing step (R3.1-R3.6), with the candidate routes the step saw and what it
  did. result: 'matched' / 'chosen' (this step decided), 'no route' / 'no candidate fits'
  (tried, nothing), 'not applicable' (the step does not apply to this conversation),
  'not reached' (an earlier step decided), 'delayed', 'dropped'.

  reached_wildcards_only (optional): R2.5's wildcard routes are listed only for the keys
  that reach R2.5, not as the candidates of a step 'not reached' for every key; the steps
  and results are the same (a reader that never looks at an unreached step's candidates
  asks for this: it is a row fewer per key and wildcard).
-#}
WITH
{% with wildcards_for_every_key = not (reached_wildcards_only is defined
    and reached_wildcards_only) -%}
{% include 'routing/_route_steps.sql' %}
{%- endwith %},

step AS (
    SELECT * FROM (VALUES
        (1, 'R2.1', 'routes naming the service and the conversation''s broker identifier'),
        (2, 'R2.2', 'routes naming the service and no broker identifier'),
        (3, 'R2.3', 'routes naming the service and some broker identifier (one is picked)'),
        (4, 'R2.4', 'a route to the dynamic routing service, no route request pending'),
        (5, 'R2.5', 'wildcard routes: no service name, no broker identifier'),
        (6, 'R2.6', 'an implicit LOCAL route: a service of that name exists in this instance'),
        (7, 'R2.7', 'no matching route: the conversation is DELAYED'),
        (11, 'R3.1', 'a route with a mirror address'),
        (12, 'R3.2', 'a LOCAL route, if the service exists in this instance (R4)'),
        (13, 'R3.3', 'a route with a network address'),
        (14, 'R3.4', 'a TRANSPORT route (the service name begins with the address)'),
        (15, 'R3.5', 'nothing chosen: local origin DELAYED, remote origin dropped'),
        (16, 'R3.6', 'forwarding off: a message from outside not for LOCAL is dropped')
    ) AS t(step_order, step, description)
),

step_candidates AS (
    SELECT m.origin, m.service_name, m.broker_key, m.routed_at, m.match_order AS step_order,
        LIST_SORT(LIST(COALESCE(m.route_name, CASE WHEN m.match_order = 4
            THEN '(dynamic routing service)' ELSE '(implicit LOCAL route)' END)))
            AS candidates
    FROM matched AS m
    GROUP BY m.origin, m.service_name, m.broker_key, m.routed_at, m.match_order
    UNION ALL
    SELECT c.origin, c.service_name, c.broker_key, c.routed_at, 10 + c.choose_order,
        LIST_SORT(LIST(COALESCE(c.route_name, '(implicit LOCAL route)'))) AS candidates
    FROM classified AS c
    GROUP BY c.origin, c.service_name, c.broker_key, c.routed_at, c.choose_order
),

key_outcome AS (
    SELECT o.origin, o.service_name, o.broker_key, o.routed_at,
        MIN(o.match_order) AS match_order,
        MIN(COALESCE(o.choose_order, 99)) AS first_choose_order,
        MAX(CASE WHEN o.choose_order BETWEEN 1 AND 4 THEN o.choose_order END)
            AS last_choose_order,
        MAX(CASE WHEN o.decided_by = 'R3.5' THEN 1 ELSE 0 END) AS any_unchosen,
        MAX(CASE WHEN o.decided_by = 'R3.6' THEN 1 ELSE 0 END) AS any_dropped
    FROM route_option AS o
    GROUP BY o.origin, o.service_name, o.broker_key, o.routed_at
)

SELECT
    k.origin,
    k.service_name,
    CASE WHEN k.broker_key = '' THEN NULL ELSE k.broker_key END AS broker_instance,
    k.routed_at,
    s.step_order,
    s.step,
    s.description,
    COALESCE(c.candidates, CAST([] AS VARCHAR[])) AS candidates,
    CASE
        -- matching
        WHEN s.step_order <= 7 AND s.step_order > k.match_order THEN 'not reached'
        WHEN s.step_order IN (1, 6) AND k.broker_key = '' THEN 'not applicable'
        WHEN s.step_order = 3 AND k.broker_key <> '' THEN 'not applicable'
        WHEN s.step_order IN (4, 7) AND s.step_order = k.match_order THEN
            CASE WHEN k.origin = 'outside' THEN 'dropped' ELSE 'delayed' END
        WHEN s.step_order <= 7 AND s.step_order = k.match_order THEN 'matched'
        WHEN s.step_order <= 7 THEN 'no route'
        -- choosing (only after a step that yields routes)
        WHEN k.match_order IN (4, 7) THEN 'not reached'
        WHEN s.step_order = 15 AND k.any_unchosen = 1 THEN
            CASE WHEN k.origin = 'outside' THEN 'dropped' ELSE 'delayed' END
        WHEN s.step_order = 16 AND k.any_dropped = 1 THEN 'dropped'
        WHEN s.step_order >= 15 THEN 'not reached'
        WHEN s.step_order - 10 = k.first_choose_order
            OR s.step_order - 10 = k.last_choose_order THEN 'chosen'
        WHEN s.step_order - 10 > COALESCE(k.last_choose_order, 0)
            AND k.any_unchosen = 0 THEN 'not reached'
        WHEN s.step_order = 12 AND c.candidates IS NOT NULL
            THEN 'no candidate fits: the service is not in this instance'
        ELSE 'no candidate fits'
    END AS result
FROM key_outcome AS k
CROSS JOIN step AS s
LEFT JOIN step_candidates AS c
    ON c.origin = k.origin AND c.service_name = k.service_name
    AND c.broker_key = k.broker_key AND c.routed_at = k.routed_at
    AND c.step_order = s.step_order
ORDER BY k.origin, k.service_name, k.broker_key, k.routed_at, s.step_order
