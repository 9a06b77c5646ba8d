{#-
  The routing process of SPEC R1-R4 as a chain of CTEs, one per step; included by
  resolve_route_options.sql and explain_route.sql (a partial: it is the body of a WITH).

  Input relation {{ conversations }}: origin (a database name, or 'outside' for a message
  that arrived from outside the instance), service_name, broker_instance (NULL when the
  conversation names none) and routed_at (UTC instant at which expiry is judged, R1.4).
  Catalog relations: {{ databases }}, {{ services }}, {{ routes }}, {{ route_requests }},
  {{ instance_settings }} (the tables of migrations/).

  Every row from here on is keyed by the conversation key
  (origin, service_name, broker_key, routed_at); broker_key is broker_instance with NULL
  made '' so that keys join with plain equality on every engine.

  without_weights (optional): route_option's weight is NULL for chosen routes, and the
  windows that compute it are left out (pipeline/key_options.sql ranks the options itself).
-#}
{% set weighted = not (without_weights is defined and without_weights) -%}
conversation_key AS (
    -- R1.1 / R1.2: a conversation begun in database D is routed with D's table only; a
    -- message from outside with msdb's.
    SELECT DISTINCT
        c.origin,
        c.service_name,
        COALESCE(c.broker_instance, '') AS broker_key,
        c.routed_at,
        d.database_id AS routing_database_id,
        o.database_id AS origin_database_id
    FROM {{ conversations }} AS c
    JOIN {{ databases }} AS d
        ON d.name = CASE WHEN c.origin = 'outside' THEN 'msdb' ELSE c.origin END
    LEFT JOIN {{ databases }} AS o
        ON o.name = c.origin AND c.origin <> 'outside'
),

service_route AS (
    -- Routes that name the conversation's service; R2.1-R2.3 draw from these.
    -- R1.4: expired routes are ignored by every step.
    SELECT
        k.origin, k.service_name, k.broker_key, k.routed_at,
        r.name AS route_name,
        COALESCE(r.broker_instance, '') AS route_broker_key,
        r.address,
        r.mirror_address
    FROM conversation_key AS k
    JOIN {{ routes }} AS r
        ON r.database_id = k.routing_database_id
        AND r.remote_service_name = k.service_name
    WHERE r.lifetime IS NULL OR r.lifetime > k.routed_at
),

match_service_and_broker AS (
    -- R2.1: service name AND broker identifier both equal the conversation's.
    SELECT s.*, 1 AS match_order
    FROM service_route AS s
    WHERE s.broker_key <> '' AND s.route_broker_key = s.broker_key
),

match_service AS (
    -- R2.2: service name equal, broker identifier NULL.
    SELECT s.*, 2 AS match_order
    FROM service_route AS s
    WHERE s.route_broker_key = ''
),

match_service_any_broker AS (
    -- R2.3: the conversation names no broker identifier; routes for the service that name
    -- one. The arbitrary pick of one identifier is made per conversation, later (pick_group).
    SELECT s.*, 3 AS match_order
    FROM service_route AS s
    WHERE s.broker_key = '' AND s.route_broker_key <> ''
),

dynamic_routing AS (
    -- R2.4: a live route to the dynamic routing service exists (R8.1) and no route request
    -- for this service is pending: the conversation is DELAYED and a request is due.
    SELECT DISTINCT
        k.origin, k.service_name, k.broker_key, k.routed_at,
        CAST(NULL AS VARCHAR) AS route_name,
        '' AS route_broker_key,
        CAST(NULL AS VARCHAR) AS address,
        CAST(NULL AS VARCHAR) AS mirror_address,
        4 AS match_order
    FROM conversation_key AS k
    JOIN {{ routes }} AS r
        ON r.database_id = k.routing_database_id
        AND r.remote_service_name = 'SQL/ServiceBroker/BrokerConfiguration'
    LEFT JOIN {{ route_requests }} AS q
        ON q.database_id = k.routing_database_id AND q.service_name = k.service_name
    WHERE (r.lifetime IS NULL OR r.lifetime > k.routed_at) AND q.service_name IS NULL
),

{% if not (wildcards_for_every_key is defined and wildcards_for_every_key) -%}
matched_by_service_route AS (
    -- The keys R2.1-R2.3 decide: a service route that one of them takes (a key naming a
    -- broker identifier takes routes with that identifier or none; a key naming none takes
    -- them all). Wildcards are matched only for keys that neither these nor R2.4
    -- (dynamic_routing) decide: every database's AutoCreatedLocal is a wildcard, so
    -- matching them for every key multiplied the rows of every later step. (Two anti
    -- joins rather than one over a UNION: Spark 4.3 fails to checkpoint a plan with that
    -- UNION, "key not found" in its constraint propagation.)
    SELECT DISTINCT s.origin, s.service_name, s.broker_key, s.routed_at
    FROM service_route AS s
    WHERE s.broker_key = '' OR s.route_broker_key = '' OR s.route_broker_key = s.broker_key
),

{% endif -%}
{% if not (wildcards_for_every_key is defined and wildcards_for_every_key) -%}
unmatched_key AS (
    -- The keys that neither R2.1-R2.3 (matched_by_service_route) nor R2.4
    -- (dynamic_routing) decide, found before the wildcards are joined: joining first and
    -- filtering after made a row for every key and every wildcard.
    SELECT k.*
    FROM conversation_key AS k
    LEFT JOIN matched_by_service_route AS e
        ON e.origin = k.origin AND e.service_name = k.service_name
        AND e.broker_key = k.broker_key AND e.routed_at = k.routed_at
    LEFT JOIN dynamic_routing AS y
        ON y.origin = k.origin AND y.service_name = k.service_name
        AND y.broker_key = k.broker_key AND y.routed_at = k.routed_at
    WHERE e.origin IS NULL AND y.origin IS NULL
),

{% endif -%}
match_wildcard AS (
    -- R2.5: routes that name neither a service nor a broker identifier. explain_route.sql
    -- shows every step's candidates (wildcards_for_every_key); deciding needs them only for
    -- keys that no earlier step matched.
    SELECT
        k.origin, k.service_name, k.broker_key, k.routed_at,
        r.name AS route_name,
        '' AS route_broker_key,
        r.address,
        r.mirror_address,
        5 AS match_order
    {% if not (wildcards_for_every_key is defined and wildcards_for_every_key) -%}
    FROM unmatched_key AS k
    {%- else -%}
    FROM conversation_key AS k
    {%- endif %}
    JOIN {{ routes }} AS r
        ON r.database_id = k.routing_database_id
        AND r.remote_service_name IS NULL
        AND r.broker_instance IS NULL
    WHERE r.lifetime IS NULL OR r.lifetime > k.routed_at
),

service_anywhere AS (
    SELECT DISTINCT s.name AS service_name
    FROM {{ services }} AS s
),

implicit_local AS (
    -- R2.6: the conversation names a broker identifier and some database of this instance
    -- has a service of that name: behave as if a route (service, 'LOCAL') existed. It is no
    -- row of the routing table, so it has no name.
    SELECT
        k.origin, k.service_name, k.broker_key, k.routed_at,
        CAST(NULL AS VARCHAR) AS route_name,
        '' AS route_broker_key,
        'LOCAL' AS address,
        CAST(NULL AS VARCHAR) AS mirror_address,
        6 AS match_order
    FROM conversation_key AS k
    JOIN service_anywhere AS a ON a.service_name = k.service_name
    WHERE k.broker_key <> ''
),

matched AS (
    SELECT * FROM match_service_and_broker
    UNION ALL SELECT * FROM match_service
    UNION ALL SELECT * FROM match_service_any_broker
    UNION ALL SELECT * FROM dynamic_routing
    UNION ALL SELECT * FROM match_wildcard
    UNION ALL SELECT * FROM implicit_local
),

match_step AS (
    -- R2: the first step that yields one or more routes ends the search. A key with no
    -- row here fell through to R2.7 (DELAYED; not an error).
    SELECT m.origin, m.service_name, m.broker_key, m.routed_at, MIN(m.match_order) AS match_order
    FROM matched AS m
    GROUP BY m.origin, m.service_name, m.broker_key, m.routed_at
),

candidate AS (
    -- The candidate set: the routes of the deciding step. pick_group is the broker
    -- identifier of an R2.3 candidate (one identifier is picked per conversation) and ''
    -- for every other step.
    SELECT
        m.*,
        CASE WHEN m.match_order = 3 THEN m.route_broker_key ELSE '' END AS pick_group
    FROM matched AS m
    JOIN match_step AS s
        ON s.origin = m.origin AND s.service_name = m.service_name
        AND s.broker_key = m.broker_key AND s.routed_at = m.routed_at
        AND s.match_order = m.match_order
    WHERE m.match_order <> 4
),

distinct_candidate AS (
    -- R3: routes with the same broker identifier, service name and address count as one
    -- (the service name is shared by every candidate of one key). The lowest name stands
    -- for the group.
    SELECT
        c.origin, c.service_name, c.broker_key, c.routed_at, c.match_order, c.pick_group,
        c.route_broker_key, c.address,
        MIN(c.route_name) AS route_name,
        MIN(c.mirror_address) AS mirror_address
    FROM candidate AS c
    GROUP BY c.origin, c.service_name, c.broker_key, c.routed_at, c.match_order,
        c.pick_group, c.route_broker_key, c.address
),

pick_group_count AS (
    SELECT
        c.origin, c.service_name, c.broker_key, c.routed_at,
        COUNT(DISTINCT c.pick_group) AS group_count
    FROM distinct_candidate AS c
    GROUP BY c.origin, c.service_name, c.broker_key, c.routed_at
),

classified AS (
    -- R3.1-R3.4: the choosing step each candidate belongs to.
    SELECT
        c.*,
        CASE
            WHEN c.mirror_address IS NOT NULL THEN 1
            WHEN c.address = 'LOCAL' THEN 2
            WHEN c.address = 'TRANSPORT' THEN 4
            ELSE 3
        END AS choose_order,
        -- R10.6: a TRANSPORT route's next hop is the tcp://host:port that begins the
        -- service name ('' when the service name does not begin with an address).
        CASE
            WHEN c.address = 'TRANSPORT'
                THEN REGEXP_EXTRACT(c.service_name, '^([tT][cC][pP]://[^/:]+:[0-9]+)', 1)
        END AS transport_address,
        -- R4.1: a broker identifier in the conversation or the route fixes the database.
        CASE WHEN c.broker_key <> '' THEN c.broker_key ELSE c.route_broker_key END
            AS locate_broker_key
    FROM distinct_candidate AS c
),

service_location AS (
    SELECT s.name AS service_name, d.database_id, d.name AS database_name,
        d.service_broker_guid
    FROM {{ services }} AS s
    JOIN {{ databases }} AS d ON d.database_id = s.database_id
),

located AS (
    -- R4.1 / R4.2: where a LOCAL candidate would deliver. R3.2 takes a LOCAL route only
    -- if the service exists, and R4.3 returns to choosing when it is not found: so a
    -- LOCAL candidate with no row here simply cannot be chosen.
    SELECT
        c.origin, c.service_name, c.broker_key, c.routed_at, c.pick_group,
        c.route_name, c.route_broker_key, c.address, c.mirror_address, c.choose_order,
        l.database_id, l.database_name, l.service_broker_guid,
        CASE WHEN c.locate_broker_key <> '' THEN 'R4.1' ELSE 'R4.2' END AS locate_step
    FROM classified AS c
    JOIN service_location AS l ON l.service_name = c.service_name
    WHERE c.choose_order = 2
        AND (c.locate_broker_key = '' OR l.service_broker_guid = c.locate_broker_key)
),

located_first AS (
    -- R4.2: the database that holds the conversation first; only when it lacks the
    -- service do the other databases count (in an unspecified order: a random pick).
    SELECT l.*
    FROM located AS l
    JOIN conversation_key AS k
        ON k.origin = l.origin AND k.service_name = l.service_name
        AND k.broker_key = l.broker_key AND k.routed_at = l.routed_at
    LEFT JOIN located AS own
        ON own.origin = l.origin AND own.service_name = l.service_name
        AND own.broker_key = l.broker_key AND own.routed_at = l.routed_at
        AND own.pick_group = l.pick_group AND own.route_broker_key = l.route_broker_key
        AND own.address = l.address
        AND own.locate_step = 'R4.2' AND own.database_id = k.origin_database_id
    WHERE l.locate_step = 'R4.1' OR own.database_id IS NULL
        OR l.database_id = k.origin_database_id
),

viable AS (
    -- Candidates that can actually be taken, with where they lead.
    SELECT
        c.origin, c.service_name, c.broker_key, c.routed_at, c.pick_group,
        c.route_name, c.route_broker_key, c.choose_order,
        c.address AS next_address, c.mirror_address,
        CAST(NULL AS VARCHAR) AS database_name,
        CAST(NULL AS VARCHAR) AS service_broker_guid,
        CAST(NULL AS VARCHAR) AS locate_step,
        c.address AS route_address
    FROM classified AS c
    WHERE c.choose_order IN (1, 3) OR (c.choose_order = 4 AND c.transport_address <> '')
    UNION ALL
    SELECT
        l.origin, l.service_name, l.broker_key, l.routed_at, l.pick_group,
        l.route_name, l.route_broker_key, l.choose_order,
        CAST(NULL AS VARCHAR) AS next_address, l.mirror_address,
        l.database_name, l.service_broker_guid, l.locate_step,
        l.address AS route_address
    FROM located_first AS l
),

choose_step AS (
    -- R3: the first choosing step that some viable candidate fits, per picked identifier.
    SELECT
        v.origin, v.service_name, v.broker_key, v.routed_at, v.pick_group,
        MIN(v.choose_order) AS choose_order
    FROM viable AS v
    GROUP BY v.origin, v.service_name, v.broker_key, v.routed_at, v.pick_group
),

chosen AS (
    -- The routes of the choosing step; one of them is taken, each equally likely, and a
    -- LOCAL route found in several databases (R4.2) splits its share among them.
    SELECT v.*
    FROM viable AS v
    JOIN choose_step AS s
        ON s.origin = v.origin AND s.service_name = v.service_name
        AND s.broker_key = v.broker_key AND s.routed_at = v.routed_at
        AND s.pick_group = v.pick_group AND s.choose_order = v.choose_order
),

{% if weighted -%}
chosen_route_count AS (
    SELECT
        c.origin, c.service_name, c.broker_key, c.routed_at, c.pick_group,
        COUNT(DISTINCT c.route_broker_key || '|' || c.route_address) AS route_count
    FROM chosen AS c
    GROUP BY c.origin, c.service_name, c.broker_key, c.routed_at, c.pick_group
),

chosen_weighted AS (
    SELECT
        c.*,
        1.0 / (g.group_count * n.route_count * COUNT(*) OVER (
            PARTITION BY c.origin, c.service_name, c.broker_key, c.routed_at, c.pick_group,
                c.route_broker_key, c.route_address
        )) AS weight
    FROM chosen AS c
    JOIN chosen_route_count AS n
        ON n.origin = c.origin AND n.service_name = c.service_name
        AND n.broker_key = c.broker_key AND n.routed_at = c.routed_at
        AND n.pick_group = c.pick_group
    JOIN pick_group_count AS g
        ON g.origin = c.origin AND g.service_name = c.service_name
        AND g.broker_key = c.broker_key AND g.routed_at = c.routed_at
),

{% endif -%}
unchosen AS (
    -- R3.5: a picked identifier (or the whole candidate set) that no step could choose.
    SELECT
        c.origin, c.service_name, c.broker_key, c.routed_at, c.pick_group,
        MIN(c.match_order) AS match_order
    FROM distinct_candidate AS c
    LEFT JOIN choose_step AS s
        ON s.origin = c.origin AND s.service_name = c.service_name
        AND s.broker_key = c.broker_key AND s.routed_at = c.routed_at
        AND s.pick_group = c.pick_group
    WHERE s.choose_order IS NULL
    GROUP BY c.origin, c.service_name, c.broker_key, c.routed_at, c.pick_group
),

forwarding AS (
    SELECT MAX(CASE WHEN f.is_forwarding_enabled THEN 1 ELSE 0 END) AS is_forwarding_enabled
    FROM {{ instance_settings }} AS f
),

route_option AS (
    -- Every possible decision per conversation key, with its probability (weight).
    -- A chosen route: deliver (LOCAL) or send, unless R3.6 drops it.
    SELECT
        c.origin, c.service_name, c.broker_key, c.routed_at, c.pick_group,
        CASE
            WHEN c.choose_order = 2 THEN 'deliver'
            WHEN c.origin = 'outside' AND f.is_forwarding_enabled = 0 THEN 'drop'
            ELSE 'send'
        END AS outcome,
        c.route_name,
        CASE
            WHEN c.choose_order = 4 THEN REGEXP_EXTRACT(c.service_name,
                '^([tT][cC][pP]://[^/:]+:[0-9]+)', 1)
            ELSE c.next_address
        END AS address,
        c.mirror_address,
        c.database_name,
        CASE
            WHEN c.choose_order = 2 THEN c.service_broker_guid
            WHEN c.broker_key <> '' THEN c.broker_key
            WHEN c.route_broker_key <> '' THEN c.route_broker_key
        END AS decision_broker_instance,
        m.match_order,
        c.choose_order,
        c.locate_step,
        CASE
            WHEN c.choose_order <> 2 AND c.origin = 'outside' AND f.is_forwarding_enabled = 0
                THEN 'R3.6'
            ELSE 'R3.' || CAST(c.choose_order AS VARCHAR)
        END AS decided_by,
        {% if weighted -%}
        c.weight
    FROM chosen_weighted AS c
        {%- else -%}
        CAST(NULL AS DOUBLE) AS weight
    FROM chosen AS c
        {%- endif %}
    JOIN match_step AS m
        ON m.origin = c.origin AND m.service_name = c.service_name
        AND m.broker_key = c.broker_key AND m.routed_at = c.routed_at
    CROSS JOIN forwarding AS f
    UNION ALL
    -- R3.5: nothing chosen: local origin -> DELAYED, remote origin -> dropped.
    SELECT
        u.origin, u.service_name, u.broker_key, u.routed_at, u.pick_group,
        CASE WHEN u.origin = 'outside' THEN 'drop' ELSE 'delay' END AS outcome,
        CAST(NULL AS VARCHAR) AS route_name,
        CAST(NULL AS VARCHAR) AS address,
        CAST(NULL AS VARCHAR) AS mirror_address,
        CAST(NULL AS VARCHAR) AS database_name,
        CASE WHEN u.broker_key <> '' THEN u.broker_key END AS decision_broker_instance,
        u.match_order,
        5 AS choose_order,
        CAST(NULL AS VARCHAR) AS locate_step,
        'R3.5' AS decided_by,
        1.0 / g.group_count AS weight
    FROM unchosen AS u
    JOIN pick_group_count AS g
        ON g.origin = u.origin AND g.service_name = u.service_name
        AND g.broker_key = u.broker_key AND g.routed_at = u.routed_at
    UNION ALL
    -- R2.4 and R2.7: matching itself decided DELAYED (a result, not an error). From outside
    -- there is nothing to hold the message, so it is dropped (the sender retries).
    SELECT
        k.origin, k.service_name, k.broker_key, k.routed_at,
        '' AS pick_group,
        CASE WHEN k.origin = 'outside' THEN 'drop' ELSE 'delay' END AS outcome,
        CAST(NULL AS VARCHAR) AS route_name,
        CAST(NULL AS VARCHAR) AS address,
        CAST(NULL AS VARCHAR) AS mirror_address,
        CAST(NULL AS VARCHAR) AS database_name,
        CASE WHEN k.broker_key <> '' THEN k.broker_key END AS decision_broker_instance,
        COALESCE(m.match_order, 7) AS match_order,
        CAST(NULL AS INTEGER) AS choose_order,
        CAST(NULL AS VARCHAR) AS locate_step,
        'R2.' || CAST(COALESCE(m.match_order, 7) AS VARCHAR) AS decided_by,
        1.0 AS weight
    FROM conversation_key AS k
    LEFT JOIN match_step AS m
        ON m.origin = k.origin AND m.service_name = k.service_name
        AND m.broker_key = k.broker_key AND m.routed_at = k.routed_at
    WHERE m.match_order IS NULL OR m.match_order = 4
)
