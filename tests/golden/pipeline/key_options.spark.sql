-- as one query
WITH decided_key AS (
  /* The keys the routing steps decide: a wildcard class once, through its least key. */
  SELECT DISTINCT
    k.key_id,
    k.origin,
    k.decided_service_name AS service_name,
    CASE
      WHEN k.decided_broker_key = ''
      THEN CAST(NULL AS STRING)
      ELSE k.decided_broker_key
    END AS broker_instance,
    k.routed_at
  FROM decision_keys AS k
), conversation_key AS (
  /* R1.1 / R1.2: a conversation begun in database D is routed with D's table only; a */
  /* message from outside with msdb's. */
  SELECT DISTINCT
    c.origin,
    c.service_name,
    COALESCE(c.broker_instance, '') AS broker_key,
    c.routed_at,
    d.database_id AS routing_database_id,
    o.database_id AS origin_database_id
  FROM decided_key AS c
  JOIN state_databases AS d
    ON d.name = CASE WHEN c.origin = 'outside' THEN 'msdb' ELSE c.origin END
  LEFT JOIN state_databases AS o
    ON o.name = c.origin AND c.origin <> 'outside'
), service_route AS (
  /* Routes that name the conversation's service; R2.1-R2.3 draw from these. */
  /* R1.4: expired routes are ignored by every step. */
  SELECT
    k.origin,
    k.service_name,
    k.broker_key,
    k.routed_at,
    r.name AS route_name,
    COALESCE(r.broker_instance, '') AS route_broker_key,
    r.address,
    r.mirror_address
  FROM conversation_key AS k
  JOIN state_routes AS r
    ON r.database_id = k.routing_database_id AND r.remote_service_name = k.service_name
  WHERE
    r.lifetime IS NULL OR r.lifetime > k.routed_at
), match_service_and_broker AS (
  /* R2.1: service name AND broker identifier both equal the conversation's. */
  SELECT
    s.*,
    1 AS match_order
  FROM service_route AS s
  WHERE
    s.broker_key <> '' AND s.route_broker_key = s.broker_key
), match_service AS (
  /* R2.2: service name equal, broker identifier NULL. */
  SELECT
    s.*,
    2 AS match_order
  FROM service_route AS s
  WHERE
    s.route_broker_key = ''
), match_service_any_broker AS (
  /* R2.3: the conversation names no broker identifier; routes for the service that name */
  /* one. The arbitrary pick of one identifier is made per conversation, later (pick_group). */
  SELECT
    s.*,
    3 AS match_order
  FROM service_route AS s
  WHERE
    s.broker_key = '' AND s.route_broker_key <> ''
), dynamic_routing AS (
  /* R2.4: a live route to the dynamic routing service exists (R8.1) and no route request */
  /* for this service is pending: the conversation is DELAYED and a request is due. */
  SELECT DISTINCT
    k.origin,
    k.service_name,
    k.broker_key,
    k.routed_at,
    CAST(NULL AS STRING) AS route_name,
    '' AS route_broker_key,
    CAST(NULL AS STRING) AS address,
    CAST(NULL AS STRING) AS mirror_address,
    4 AS match_order
  FROM conversation_key AS k
  JOIN state_routes AS r
    ON r.database_id = k.routing_database_id
    AND r.remote_service_name = 'SQL/ServiceBroker/BrokerConfiguration'
  LEFT JOIN state_route_requests AS q
    ON q.database_id = k.routing_database_id AND q.service_name = k.service_name
  WHERE
    (
      r.lifetime IS NULL OR r.lifetime > k.routed_at
    ) AND q.service_name IS NULL
), matched_by_service_route AS (
  /* The keys R2.1-R2.3 decide: a service route that one of them takes (a key naming a */
  /* broker identifier takes routes with that identifier or none; a key naming none takes */
  /* them all). Wildcards are matched only for keys that neither these nor R2.4 */
  /* (dynamic_routing) decide: every database's AutoCreatedLocal is a wildcard, so */
  /* matching them for every key multiplied the rows of every later step. (Two anti */
  /* joins rather than one over a UNION: Spark 4.3 fails to checkpoint a plan with that */
  /* UNION, "key not found" in its constraint propagation.) */
  SELECT DISTINCT
    s.origin,
    s.service_name,
    s.broker_key,
    s.routed_at
  FROM service_route AS s
  WHERE
    s.broker_key = '' OR s.route_broker_key = '' OR s.route_broker_key = s.broker_key
), unmatched_key AS (
  /* The keys that neither R2.1-R2.3 (matched_by_service_route) nor R2.4 */
  /* (dynamic_routing) decide, found before the wildcards are joined: joining first and */
  /* filtering after made a row for every key and every wildcard. */
  SELECT
    k.*
  FROM conversation_key AS k
  LEFT JOIN matched_by_service_route AS e
    ON e.origin = k.origin
    AND e.service_name = k.service_name
    AND e.broker_key = k.broker_key
    AND e.routed_at = k.routed_at
  LEFT JOIN dynamic_routing AS y
    ON y.origin = k.origin
    AND y.service_name = k.service_name
    AND y.broker_key = k.broker_key
    AND y.routed_at = k.routed_at
  WHERE
    e.origin IS NULL AND y.origin IS NULL
), match_wildcard AS (
  /* R2.5: routes that name neither a service nor a broker identifier. explain_route.sql */
  /* shows every step's candidates (wildcards_for_every_key); deciding needs them only for */
  /* keys that no earlier step matched. */
  SELECT
    k.origin,
    k.service_name,
    k.broker_key,
    k.routed_at,
    r.name AS route_name,
    '' AS route_broker_key,
    r.address,
    r.mirror_address,
    5 AS match_order
  FROM unmatched_key AS k
  JOIN state_routes AS r
    ON r.database_id = k.routing_database_id
    AND r.remote_service_name IS NULL
    AND r.broker_instance IS NULL
  WHERE
    r.lifetime IS NULL OR r.lifetime > k.routed_at
), service_anywhere AS (
  SELECT DISTINCT
    s.name AS service_name
  FROM state_services AS s
), implicit_local AS (
  /* R2.6: the conversation names a broker identifier and some database of this instance */
  /* has a service of that name: behave as if a route (service, 'LOCAL') existed. It is no */
  /* row of the routing table, so it has no name. */
  SELECT
    k.origin,
    k.service_name,
    k.broker_key,
    k.routed_at,
    CAST(NULL AS STRING) AS route_name,
    '' AS route_broker_key,
    'LOCAL' AS address,
    CAST(NULL AS STRING) AS mirror_address,
    6 AS match_order
  FROM conversation_key AS k
  JOIN service_anywhere AS a
    ON a.service_name = k.service_name
  WHERE
    k.broker_key <> ''
), matched AS (
  SELECT
    *
  FROM match_service_and_broker
  UNION ALL
  SELECT
    *
  FROM match_service
  UNION ALL
  SELECT
    *
  FROM match_service_any_broker
  UNION ALL
  SELECT
    *
  FROM dynamic_routing
  UNION ALL
  SELECT
    *
  FROM match_wildcard
  UNION ALL
  SELECT
    *
  FROM implicit_local
), match_step AS (
  /* R2: the first step that yields one or more routes ends the search. A key with no */
  /* row here fell through to R2.7 (DELAYED; not an error). */
  SELECT
    m.origin,
    m.service_name,
    m.broker_key,
    m.routed_at,
    MIN(m.match_order) AS match_order
  FROM matched AS m
  GROUP BY
    m.origin,
    m.service_name,
    m.broker_key,
    m.routed_at
), candidate AS (
  /* The candidate set: the routes of the deciding step. pick_group is the broker */
  /* identifier of an R2.3 candidate (one identifier is picked per conversation) and '' */
  /* for every other step. */
  SELECT
    m.*,
    CASE WHEN m.match_order = 3 THEN m.route_broker_key ELSE '' END AS pick_group
  FROM matched AS m
  JOIN match_step AS s
    ON s.origin = m.origin
    AND s.service_name = m.service_name
    AND s.broker_key = m.broker_key
    AND s.routed_at = m.routed_at
    AND s.match_order = m.match_order
  WHERE
    m.match_order <> 4
), distinct_candidate AS (
  /* R3: routes with the same broker identifier, service name and address count as one */
  /* (the service name is shared by every candidate of one key). The lowest name stands */
  /* for the group. */
  SELECT
    c.origin,
    c.service_name,
    c.broker_key,
    c.routed_at,
    c.match_order,
    c.pick_group,
    c.route_broker_key,
    c.address,
    MIN(c.route_name) AS route_name,
    MIN(c.mirror_address) AS mirror_address
  FROM candidate AS c
  GROUP BY
    c.origin,
    c.service_name,
    c.broker_key,
    c.routed_at,
    c.match_order,
    c.pick_group,
    c.route_broker_key,
    c.address
), pick_group_count AS (
  SELECT
    c.origin,
    c.service_name,
    c.broker_key,
    c.routed_at,
    COUNT(DISTINCT c.pick_group) AS group_count
  FROM distinct_candidate AS c
  GROUP BY
    c.origin,
    c.service_name,
    c.broker_key,
    c.routed_at
), classified AS (
  /* R3.1-R3.4: the choosing step each candidate belongs to. */
  SELECT
    c.*,
    CASE
      WHEN NOT c.mirror_address IS NULL
      THEN 1
      WHEN c.address = 'LOCAL'
      THEN 2
      WHEN c.address = 'TRANSPORT'
      THEN 4
      ELSE 3
    END AS choose_order,
    CASE
      WHEN c.address = 'TRANSPORT'
      THEN REGEXP_EXTRACT(c.service_name, '^([tT][cC][pP]://[^/:]+:[0-9]+)')
    END AS transport_address, /* R10.6: a TRANSPORT route's next hop is the tcp://host:port that begins the */ /* service name ('' when the service name does not begin with an address). */
    CASE WHEN c.broker_key <> '' THEN c.broker_key ELSE c.route_broker_key END AS locate_broker_key /* R4.1: a broker identifier in the conversation or the route fixes the database. */
  FROM distinct_candidate AS c
), service_location AS (
  SELECT
    s.name AS service_name,
    d.database_id,
    d.name AS database_name,
    d.service_broker_guid
  FROM state_services AS s
  JOIN state_databases AS d
    ON d.database_id = s.database_id
), located AS (
  /* R4.1 / R4.2: where a LOCAL candidate would deliver. R3.2 takes a LOCAL route only */
  /* if the service exists, and R4.3 returns to choosing when it is not found: so a */
  /* LOCAL candidate with no row here simply cannot be chosen. */
  SELECT
    c.origin,
    c.service_name,
    c.broker_key,
    c.routed_at,
    c.pick_group,
    c.route_name,
    c.route_broker_key,
    c.address,
    c.mirror_address,
    c.choose_order,
    l.database_id,
    l.database_name,
    l.service_broker_guid,
    CASE WHEN c.locate_broker_key <> '' THEN 'R4.1' ELSE 'R4.2' END AS locate_step
  FROM classified AS c
  JOIN service_location AS l
    ON l.service_name = c.service_name
  WHERE
    c.choose_order = 2
    AND (
      c.locate_broker_key = '' OR l.service_broker_guid = c.locate_broker_key
    )
), located_first AS (
  /* R4.2: the database that holds the conversation first; only when it lacks the */
  /* service do the other databases count (in an unspecified order: a random pick). */
  SELECT
    l.*
  FROM located AS l
  JOIN conversation_key AS k
    ON k.origin = l.origin
    AND k.service_name = l.service_name
    AND k.broker_key = l.broker_key
    AND k.routed_at = l.routed_at
  LEFT JOIN located AS own
    ON own.origin = l.origin
    AND own.service_name = l.service_name
    AND own.broker_key = l.broker_key
    AND own.routed_at = l.routed_at
    AND own.pick_group = l.pick_group
    AND own.route_broker_key = l.route_broker_key
    AND own.address = l.address
    AND own.locate_step = 'R4.2'
    AND own.database_id = k.origin_database_id
  WHERE
    l.locate_step = 'R4.1'
    OR own.database_id IS NULL
    OR l.database_id = k.origin_database_id
), viable AS (
  /* Candidates that can actually be taken, with where they lead. */
  SELECT
    c.origin,
    c.service_name,
    c.broker_key,
    c.routed_at,
    c.pick_group,
    c.route_name,
    c.route_broker_key,
    c.choose_order,
    c.address AS next_address,
    c.mirror_address,
    CAST(NULL AS STRING) AS database_name,
    CAST(NULL AS STRING) AS service_broker_guid,
    CAST(NULL AS STRING) AS locate_step,
    c.address AS route_address
  FROM classified AS c
  WHERE
    c.choose_order IN (1, 3)
    OR (
      c.choose_order = 4 AND c.transport_address <> ''
    )
  UNION ALL
  SELECT
    l.origin,
    l.service_name,
    l.broker_key,
    l.routed_at,
    l.pick_group,
    l.route_name,
    l.route_broker_key,
    l.choose_order,
    CAST(NULL AS STRING) AS next_address,
    l.mirror_address,
    l.database_name,
    l.service_broker_guid,
    l.locate_step,
    l.address AS route_address
  FROM located_first AS l
), choose_step AS (
  /* R3: the first choosing step that some viable candidate fits, per picked identifier. */
  SELECT
    v.origin,
    v.service_name,
    v.broker_key,
    v.routed_at,
    v.pick_group,
    MIN(v.choose_order) AS choose_order
  FROM viable AS v
  GROUP BY
    v.origin,
    v.service_name,
    v.broker_key,
    v.routed_at,
    v.pick_group
), chosen AS (
  /* The routes of the choosing step; one of them is taken, each equally likely, and a */
  /* LOCAL route found in several databases (R4.2) splits its share among them. */
  SELECT
    v.*
  FROM viable AS v
  JOIN choose_step AS s
    ON s.origin = v.origin
    AND s.service_name = v.service_name
    AND s.broker_key = v.broker_key
    AND s.routed_at = v.routed_at
    AND s.pick_group = v.pick_group
    AND s.choose_order = v.choose_order
), unchosen AS (
  /* R3.5: a picked identifier (or the whole candidate set) that no step could choose. */
  SELECT
    c.origin,
    c.service_name,
    c.broker_key,
    c.routed_at,
    c.pick_group,
    MIN(c.match_order) AS match_order
  FROM distinct_candidate AS c
  LEFT JOIN choose_step AS s
    ON s.origin = c.origin
    AND s.service_name = c.service_name
    AND s.broker_key = c.broker_key
    AND s.routed_at = c.routed_at
    AND s.pick_group = c.pick_group
  WHERE
    s.choose_order IS NULL
  GROUP BY
    c.origin,
    c.service_name,
    c.broker_key,
    c.routed_at,
    c.pick_group
), forwarding AS (
  SELECT
    MAX(CASE WHEN f.is_forwarding_enabled THEN 1 ELSE 0 END) AS is_forwarding_enabled
  FROM state_instance_settings AS f
), route_option AS (
  /* Every possible decision per conversation key, with its probability (weight). */
  /* A chosen route: deliver (LOCAL) or send, unless R3.6 drops it. */
  SELECT
    c.origin,
    c.service_name,
    c.broker_key,
    c.routed_at,
    c.pick_group,
    CASE
      WHEN c.choose_order = 2
      THEN 'deliver'
      WHEN c.origin = 'outside' AND f.is_forwarding_enabled = 0
      THEN 'drop'
      ELSE 'send'
    END AS outcome,
    c.route_name,
    CASE
      WHEN c.choose_order = 4
      THEN REGEXP_EXTRACT(c.service_name, '^([tT][cC][pP]://[^/:]+:[0-9]+)')
      ELSE c.next_address
    END AS address,
    c.mirror_address,
    c.database_name,
    CASE
      WHEN c.choose_order = 2
      THEN c.service_broker_guid
      WHEN c.broker_key <> ''
      THEN c.broker_key
      WHEN c.route_broker_key <> ''
      THEN c.route_broker_key
    END AS decision_broker_instance,
    m.match_order,
    c.choose_order,
    c.locate_step,
    CASE
      WHEN c.choose_order <> 2 AND c.origin = 'outside' AND f.is_forwarding_enabled = 0
      THEN 'R3.6'
      ELSE 'R3.' || CAST(c.choose_order AS STRING)
    END AS decided_by,
    CAST(NULL AS DOUBLE) AS weight
  FROM chosen AS c
  JOIN match_step AS m
    ON m.origin = c.origin
    AND m.service_name = c.service_name
    AND m.broker_key = c.broker_key
    AND m.routed_at = c.routed_at
  CROSS JOIN forwarding AS f
  UNION ALL
  /* R3.5: nothing chosen: local origin -> DELAYED, remote origin -> dropped. */
  SELECT
    u.origin,
    u.service_name,
    u.broker_key,
    u.routed_at,
    u.pick_group,
    CASE WHEN u.origin = 'outside' THEN 'drop' ELSE 'delay' END AS outcome,
    CAST(NULL AS STRING) AS route_name,
    CAST(NULL AS STRING) AS address,
    CAST(NULL AS STRING) AS mirror_address,
    CAST(NULL AS STRING) AS database_name,
    CASE WHEN u.broker_key <> '' THEN u.broker_key END AS decision_broker_instance,
    u.match_order,
    5 AS choose_order,
    CAST(NULL AS STRING) AS locate_step,
    'R3.5' AS decided_by,
    1.0 / g.group_count AS weight
  FROM unchosen AS u
  JOIN pick_group_count AS g
    ON g.origin = u.origin
    AND g.service_name = u.service_name
    AND g.broker_key = u.broker_key
    AND g.routed_at = u.routed_at
  UNION ALL
  /* R2.4 and R2.7: matching itself decided DELAYED (a result, not an error). From outside */
  /* there is nothing to hold the message, so it is dropped (the sender retries). */
  SELECT
    k.origin,
    k.service_name,
    k.broker_key,
    k.routed_at,
    '' AS pick_group,
    CASE WHEN k.origin = 'outside' THEN 'drop' ELSE 'delay' END AS outcome,
    CAST(NULL AS STRING) AS route_name,
    CAST(NULL AS STRING) AS address,
    CAST(NULL AS STRING) AS mirror_address,
    CAST(NULL AS STRING) AS database_name,
    CASE WHEN k.broker_key <> '' THEN k.broker_key END AS decision_broker_instance,
    COALESCE(m.match_order, 7) AS match_order,
    CAST(NULL AS INT) AS choose_order,
    CAST(NULL AS STRING) AS locate_step,
    'R2.' || CAST(COALESCE(m.match_order, 7) AS STRING) AS decided_by,
    1.0 AS weight
  FROM conversation_key AS k
  LEFT JOIN match_step AS m
    ON m.origin = k.origin
    AND m.service_name = k.service_name
    AND m.broker_key = k.broker_key
    AND m.routed_at = k.routed_at
  WHERE
    m.match_order IS NULL OR m.match_order = 4
), keyed_option AS (
  /* The options with their key's number; the key's own columns are not carried on. */
  SELECT
    k.key_id,
    o.pick_group,
    COALESCE(o.route_name, '') AS route_key,
    o.outcome,
    o.route_name,
    o.address,
    o.mirror_address,
    o.database_name,
    o.decision_broker_instance,
    o.match_order,
    o.choose_order,
    o.locate_step,
    o.decided_by
  FROM route_option AS o
  JOIN decided_key AS k
    ON k.origin = o.origin
    AND k.service_name = o.service_name
    AND COALESCE(k.broker_instance, '') = o.broker_key
    AND k.routed_at = o.routed_at
), ranked_group /* The ranks and counts of the picks are numbered on narrow rows (one per pick group, one */ /* per route of a group) and joined back: a window over the options' own wide rows */ /* copies every column, and one per rank cost most of this stage (DuckDB at 10M x 100k). */ /* The joins back are equalities on pick_group, which is never NULL (_route_steps.sql: the */ /* route's broker identifier or ''). */ AS (
  /* R2.3: the pick groups of each key, numbered from 0. */
  SELECT
    g.key_id,
    g.pick_group,
    DENSE_RANK() OVER (PARTITION BY g.key_id ORDER BY g.pick_group NULLS LAST) - 1 AS group_rank,
    COUNT(*) OVER (PARTITION BY g.key_id) AS group_count
  FROM (
    SELECT DISTINCT
      o.key_id,
      o.pick_group
    FROM keyed_option AS o
  ) AS g
), ranked_route AS (
  /* R3: the routes of each pick group (by name), numbered from 0, each with how many */
  /* databases (R4.2 options) it has. */
  SELECT
    r.key_id,
    r.pick_group,
    r.route_key,
    r.db_count,
    DENSE_RANK() OVER (PARTITION BY r.key_id, r.pick_group ORDER BY r.route_key NULLS LAST) - 1 AS route_rank,
    COUNT(*) OVER (PARTITION BY r.key_id, r.pick_group) AS route_count
  FROM (
    SELECT
      o.key_id,
      o.pick_group,
      o.route_key,
      COUNT(*) AS db_count
    FROM keyed_option AS o
    GROUP BY
      o.key_id,
      o.pick_group,
      o.route_key
  ) AS r
), key_option_count AS (
  SELECT
    o.key_id,
    COUNT(*) AS option_count
  FROM keyed_option AS o
  GROUP BY
    o.key_id
), ranked_option AS (
  /* R4.2: the databases of each route, numbered from 0. */
  SELECT
    o.*,
    ROW_NUMBER() OVER (
      PARTITION BY o.key_id, o.pick_group, o.route_key
      ORDER BY COALESCE(o.database_name, '') NULLS LAST
    ) - 1 AS db_rank
  FROM keyed_option AS o
)
SELECT
  r.key_id,
  r.outcome,
  r.route_name AS route,
  r.address,
  r.mirror_address,
  r.database_name AS `database`,
  r.decision_broker_instance AS broker_instance,
  'R2.' || CAST(r.match_order AS STRING) AS match_step,
  CASE
    WHEN NOT r.choose_order IS NULL
    THEN 'R3.' || CAST(r.choose_order AS STRING)
  END AS choose_step,
  r.locate_step,
  r.decided_by,
  CAST(g.group_rank AS BIGINT) AS group_rank,
  CAST(g.group_count AS BIGINT) AS group_count,
  CAST(t.route_rank AS BIGINT) AS route_rank,
  CAST(t.route_count AS BIGINT) AS route_count,
  CAST(r.db_rank AS BIGINT) AS db_rank,
  CAST(t.db_count AS BIGINT) AS db_count,
  CAST(n.option_count AS BIGINT) AS option_count
FROM ranked_option AS r
JOIN ranked_group AS g
  ON g.key_id = r.key_id AND g.pick_group = r.pick_group
JOIN ranked_route AS t
  ON t.key_id = r.key_id AND t.pick_group = r.pick_group AND t.route_key = r.route_key
JOIN key_option_count AS n
  ON n.key_id = r.key_id

-- stage decided_key (read 2x)
/* The keys the routing steps decide: a wildcard class once, through its least key. */
SELECT DISTINCT
  k.key_id,
  k.origin,
  k.decided_service_name AS service_name,
  CASE
    WHEN k.decided_broker_key = ''
    THEN CAST(NULL AS STRING)
    ELSE k.decided_broker_key
  END AS broker_instance,
  k.routed_at
FROM decision_keys AS k

-- stage conversation_key (read 6x)
/* R1.1 / R1.2: a conversation begun in database D is routed with D's table only; a */
/* message from outside with msdb's. */
SELECT DISTINCT
  c.origin,
  c.service_name,
  COALESCE(c.broker_instance, '') AS broker_key,
  c.routed_at,
  d.database_id AS routing_database_id,
  o.database_id AS origin_database_id
FROM decided_key AS c
JOIN state_databases AS d
  ON d.name = CASE WHEN c.origin = 'outside' THEN 'msdb' ELSE c.origin END
LEFT JOIN state_databases AS o
  ON o.name = c.origin AND c.origin <> 'outside'

-- stage service_route (read 4x)
/* Routes that name the conversation's service; R2.1-R2.3 draw from these. */
/* R1.4: expired routes are ignored by every step. */
SELECT
  k.origin,
  k.service_name,
  k.broker_key,
  k.routed_at,
  r.name AS route_name,
  COALESCE(r.broker_instance, '') AS route_broker_key,
  r.address,
  r.mirror_address
FROM conversation_key AS k
JOIN state_routes AS r
  ON r.database_id = k.routing_database_id AND r.remote_service_name = k.service_name
WHERE
  r.lifetime IS NULL OR r.lifetime > k.routed_at

-- stage match_service_and_broker (read 1x)
/* R2.1: service name AND broker identifier both equal the conversation's. */
SELECT
  s.*,
  1 AS match_order
FROM service_route AS s
WHERE
  s.broker_key <> '' AND s.route_broker_key = s.broker_key

-- stage match_service (read 1x)
/* R2.2: service name equal, broker identifier NULL. */
SELECT
  s.*,
  2 AS match_order
FROM service_route AS s
WHERE
  s.route_broker_key = ''

-- stage match_service_any_broker (read 1x)
/* R2.3: the conversation names no broker identifier; routes for the service that name */
/* one. The arbitrary pick of one identifier is made per conversation, later (pick_group). */
SELECT
  s.*,
  3 AS match_order
FROM service_route AS s
WHERE
  s.broker_key = '' AND s.route_broker_key <> ''

-- stage dynamic_routing (read 2x)
/* R2.4: a live route to the dynamic routing service exists (R8.1) and no route request */
/* for this service is pending: the conversation is DELAYED and a request is due. */
SELECT DISTINCT
  k.origin,
  k.service_name,
  k.broker_key,
  k.routed_at,
  CAST(NULL AS STRING) AS route_name,
  '' AS route_broker_key,
  CAST(NULL AS STRING) AS address,
  CAST(NULL AS STRING) AS mirror_address,
  4 AS match_order
FROM conversation_key AS k
JOIN state_routes AS r
  ON r.database_id = k.routing_database_id
  AND r.remote_service_name = 'SQL/ServiceBroker/BrokerConfiguration'
LEFT JOIN state_route_requests AS q
  ON q.database_id = k.routing_database_id AND q.service_name = k.service_name
WHERE
  (
    r.lifetime IS NULL OR r.lifetime > k.routed_at
  ) AND q.service_name IS NULL

-- stage matched_by_service_route (read 1x)
/* The keys R2.1-R2.3 decide: a service route that one of them takes (a key naming a */
/* broker identifier takes routes with that identifier or none; a key naming none takes */
/* them all). Wildcards are matched only for keys that neither these nor R2.4 */
/* (dynamic_routing) decide: every database's AutoCreatedLocal is a wildcard, so */
/* matching them for every key multiplied the rows of every later step. (Two anti */
/* joins rather than one over a UNION: Spark 4.3 fails to checkpoint a plan with that */
/* UNION, "key not found" in its constraint propagation.) */
SELECT DISTINCT
  s.origin,
  s.service_name,
  s.broker_key,
  s.routed_at
FROM service_route AS s
WHERE
  s.broker_key = '' OR s.route_broker_key = '' OR s.route_broker_key = s.broker_key

-- stage unmatched_key (read 1x)
/* The keys that neither R2.1-R2.3 (matched_by_service_route) nor R2.4 */
/* (dynamic_routing) decide, found before the wildcards are joined: joining first and */
/* filtering after made a row for every key and every wildcard. */
SELECT
  k.*
FROM conversation_key AS k
LEFT JOIN matched_by_service_route AS e
  ON e.origin = k.origin
  AND e.service_name = k.service_name
  AND e.broker_key = k.broker_key
  AND e.routed_at = k.routed_at
LEFT JOIN dynamic_routing AS y
  ON y.origin = k.origin
  AND y.service_name = k.service_name
  AND y.broker_key = k.broker_key
  AND y.routed_at = k.routed_at
WHERE
  e.origin IS NULL AND y.origin IS NULL

-- stage match_wildcard (read 1x)
/* R2.5: routes that name neither a service nor a broker identifier. explain_route.sql */
/* shows every step's candidates (wildcards_for_every_key); deciding needs them only for */
/* keys that no earlier step matched. */
SELECT
  k.origin,
  k.service_name,
  k.broker_key,
  k.routed_at,
  r.name AS route_name,
  '' AS route_broker_key,
  r.address,
  r.mirror_address,
  5 AS match_order
FROM unmatched_key AS k
JOIN state_routes AS r
  ON r.database_id = k.routing_database_id
  AND r.remote_service_name IS NULL
  AND r.broker_instance IS NULL
WHERE
  r.lifetime IS NULL OR r.lifetime > k.routed_at

-- stage service_anywhere (read 1x)
SELECT DISTINCT
  s.name AS service_name
FROM state_services AS s

-- stage implicit_local (read 1x)
/* R2.6: the conversation names a broker identifier and some database of this instance */
/* has a service of that name: behave as if a route (service, 'LOCAL') existed. It is no */
/* row of the routing table, so it has no name. */
SELECT
  k.origin,
  k.service_name,
  k.broker_key,
  k.routed_at,
  CAST(NULL AS STRING) AS route_name,
  '' AS route_broker_key,
  'LOCAL' AS address,
  CAST(NULL AS STRING) AS mirror_address,
  6 AS match_order
FROM conversation_key AS k
JOIN service_anywhere AS a
  ON a.service_name = k.service_name
WHERE
  k.broker_key <> ''

-- stage matched (read 2x)
SELECT
  *
FROM match_service_and_broker
UNION ALL
SELECT
  *
FROM match_service
UNION ALL
SELECT
  *
FROM match_service_any_broker
UNION ALL
SELECT
  *
FROM dynamic_routing
UNION ALL
SELECT
  *
FROM match_wildcard
UNION ALL
SELECT
  *
FROM implicit_local

-- stage match_step (read 3x)
/* R2: the first step that yields one or more routes ends the search. A key with no */
/* row here fell through to R2.7 (DELAYED; not an error). */
SELECT
  m.origin,
  m.service_name,
  m.broker_key,
  m.routed_at,
  MIN(m.match_order) AS match_order
FROM matched AS m
GROUP BY
  m.origin,
  m.service_name,
  m.broker_key,
  m.routed_at

-- stage candidate (read 1x)
/* The candidate set: the routes of the deciding step. pick_group is the broker */
/* identifier of an R2.3 candidate (one identifier is picked per conversation) and '' */
/* for every other step. */
SELECT
  m.*,
  CASE WHEN m.match_order = 3 THEN m.route_broker_key ELSE '' END AS pick_group
FROM matched AS m
JOIN match_step AS s
  ON s.origin = m.origin
  AND s.service_name = m.service_name
  AND s.broker_key = m.broker_key
  AND s.routed_at = m.routed_at
  AND s.match_order = m.match_order
WHERE
  m.match_order <> 4

-- stage distinct_candidate (read 3x)
/* R3: routes with the same broker identifier, service name and address count as one */
/* (the service name is shared by every candidate of one key). The lowest name stands */
/* for the group. */
SELECT
  c.origin,
  c.service_name,
  c.broker_key,
  c.routed_at,
  c.match_order,
  c.pick_group,
  c.route_broker_key,
  c.address,
  MIN(c.route_name) AS route_name,
  MIN(c.mirror_address) AS mirror_address
FROM candidate AS c
GROUP BY
  c.origin,
  c.service_name,
  c.broker_key,
  c.routed_at,
  c.match_order,
  c.pick_group,
  c.route_broker_key,
  c.address

-- stage pick_group_count (read 1x)
SELECT
  c.origin,
  c.service_name,
  c.broker_key,
  c.routed_at,
  COUNT(DISTINCT c.pick_group) AS group_count
FROM distinct_candidate AS c
GROUP BY
  c.origin,
  c.service_name,
  c.broker_key,
  c.routed_at

-- stage classified (read 2x)
/* R3.1-R3.4: the choosing step each candidate belongs to. */
SELECT
  c.*,
  CASE
    WHEN NOT c.mirror_address IS NULL
    THEN 1
    WHEN c.address = 'LOCAL'
    THEN 2
    WHEN c.address = 'TRANSPORT'
    THEN 4
    ELSE 3
  END AS choose_order,
  CASE
    WHEN c.address = 'TRANSPORT'
    THEN REGEXP_EXTRACT(c.service_name, '^([tT][cC][pP]://[^/:]+:[0-9]+)')
  END AS transport_address, /* R10.6: a TRANSPORT route's next hop is the tcp://host:port that begins the */ /* service name ('' when the service name does not begin with an address). */
  CASE WHEN c.broker_key <> '' THEN c.broker_key ELSE c.route_broker_key END AS locate_broker_key /* R4.1: a broker identifier in the conversation or the route fixes the database. */
FROM distinct_candidate AS c

-- stage service_location (read 1x)
SELECT
  s.name AS service_name,
  d.database_id,
  d.name AS database_name,
  d.service_broker_guid
FROM state_services AS s
JOIN state_databases AS d
  ON d.database_id = s.database_id

-- stage located (read 2x)
/* R4.1 / R4.2: where a LOCAL candidate would deliver. R3.2 takes a LOCAL route only */
/* if the service exists, and R4.3 returns to choosing when it is not found: so a */
/* LOCAL candidate with no row here simply cannot be chosen. */
SELECT
  c.origin,
  c.service_name,
  c.broker_key,
  c.routed_at,
  c.pick_group,
  c.route_name,
  c.route_broker_key,
  c.address,
  c.mirror_address,
  c.choose_order,
  l.database_id,
  l.database_name,
  l.service_broker_guid,
  CASE WHEN c.locate_broker_key <> '' THEN 'R4.1' ELSE 'R4.2' END AS locate_step
FROM classified AS c
JOIN service_location AS l
  ON l.service_name = c.service_name
WHERE
  c.choose_order = 2
  AND (
    c.locate_broker_key = '' OR l.service_broker_guid = c.locate_broker_key
  )

-- stage located_first (read 1x)
/* R4.2: the database that holds the conversation first; only when it lacks the */
/* service do the other databases count (in an unspecified order: a random pick). */
SELECT
  l.*
FROM located AS l
JOIN conversation_key AS k
  ON k.origin = l.origin
  AND k.service_name = l.service_name
  AND k.broker_key = l.broker_key
  AND k.routed_at = l.routed_at
LEFT JOIN located AS own
  ON own.origin = l.origin
  AND own.service_name = l.service_name
  AND own.broker_key = l.broker_key
  AND own.routed_at = l.routed_at
  AND own.pick_group = l.pick_group
  AND own.route_broker_key = l.route_broker_key
  AND own.address = l.address
  AND own.locate_step = 'R4.2'
  AND own.database_id = k.origin_database_id
WHERE
  l.locate_step = 'R4.1'
  OR own.database_id IS NULL
  OR l.database_id = k.origin_database_id

-- stage viable (read 2x)
/* Candidates that can actually be taken, with where they lead. */
SELECT
  c.origin,
  c.service_name,
  c.broker_key,
  c.routed_at,
  c.pick_group,
  c.route_name,
  c.route_broker_key,
  c.choose_order,
  c.address AS next_address,
  c.mirror_address,
  CAST(NULL AS STRING) AS database_name,
  CAST(NULL AS STRING) AS service_broker_guid,
  CAST(NULL AS STRING) AS locate_step,
  c.address AS route_address
FROM classified AS c
WHERE
  c.choose_order IN (1, 3)
  OR (
    c.choose_order = 4 AND c.transport_address <> ''
  )
UNION ALL
SELECT
  l.origin,
  l.service_name,
  l.broker_key,
  l.routed_at,
  l.pick_group,
  l.route_name,
  l.route_broker_key,
  l.choose_order,
  CAST(NULL AS STRING) AS next_address,
  l.mirror_address,
  l.database_name,
  l.service_broker_guid,
  l.locate_step,
  l.address AS route_address
FROM located_first AS l

-- stage choose_step (read 2x)
/* R3: the first choosing step that some viable candidate fits, per picked identifier. */
SELECT
  v.origin,
  v.service_name,
  v.broker_key,
  v.routed_at,
  v.pick_group,
  MIN(v.choose_order) AS choose_order
FROM viable AS v
GROUP BY
  v.origin,
  v.service_name,
  v.broker_key,
  v.routed_at,
  v.pick_group

-- stage chosen (read 1x)
/* The routes of the choosing step; one of them is taken, each equally likely, and a */
/* LOCAL route found in several databases (R4.2) splits its share among them. */
SELECT
  v.*
FROM viable AS v
JOIN choose_step AS s
  ON s.origin = v.origin
  AND s.service_name = v.service_name
  AND s.broker_key = v.broker_key
  AND s.routed_at = v.routed_at
  AND s.pick_group = v.pick_group
  AND s.choose_order = v.choose_order

-- stage unchosen (read 1x)
/* R3.5: a picked identifier (or the whole candidate set) that no step could choose. */
SELECT
  c.origin,
  c.service_name,
  c.broker_key,
  c.routed_at,
  c.pick_group,
  MIN(c.match_order) AS match_order
FROM distinct_candidate AS c
LEFT JOIN choose_step AS s
  ON s.origin = c.origin
  AND s.service_name = c.service_name
  AND s.broker_key = c.broker_key
  AND s.routed_at = c.routed_at
  AND s.pick_group = c.pick_group
WHERE
  s.choose_order IS NULL
GROUP BY
  c.origin,
  c.service_name,
  c.broker_key,
  c.routed_at,
  c.pick_group

-- stage forwarding (read 1x)
SELECT
  MAX(CASE WHEN f.is_forwarding_enabled THEN 1 ELSE 0 END) AS is_forwarding_enabled
FROM state_instance_settings AS f

-- stage route_option (read 1x)
/* Every possible decision per conversation key, with its probability (weight). */
/* A chosen route: deliver (LOCAL) or send, unless R3.6 drops it. */
SELECT
  c.origin,
  c.service_name,
  c.broker_key,
  c.routed_at,
  c.pick_group,
  CASE
    WHEN c.choose_order = 2
    THEN 'deliver'
    WHEN c.origin = 'outside' AND f.is_forwarding_enabled = 0
    THEN 'drop'
    ELSE 'send'
  END AS outcome,
  c.route_name,
  CASE
    WHEN c.choose_order = 4
    THEN REGEXP_EXTRACT(c.service_name, '^([tT][cC][pP]://[^/:]+:[0-9]+)')
    ELSE c.next_address
  END AS address,
  c.mirror_address,
  c.database_name,
  CASE
    WHEN c.choose_order = 2
    THEN c.service_broker_guid
    WHEN c.broker_key <> ''
    THEN c.broker_key
    WHEN c.route_broker_key <> ''
    THEN c.route_broker_key
  END AS decision_broker_instance,
  m.match_order,
  c.choose_order,
  c.locate_step,
  CASE
    WHEN c.choose_order <> 2 AND c.origin = 'outside' AND f.is_forwarding_enabled = 0
    THEN 'R3.6'
    ELSE 'R3.' || CAST(c.choose_order AS STRING)
  END AS decided_by,
  CAST(NULL AS DOUBLE) AS weight
FROM chosen AS c
JOIN match_step AS m
  ON m.origin = c.origin
  AND m.service_name = c.service_name
  AND m.broker_key = c.broker_key
  AND m.routed_at = c.routed_at
CROSS JOIN forwarding AS f
UNION ALL
/* R3.5: nothing chosen: local origin -> DELAYED, remote origin -> dropped. */
SELECT
  u.origin,
  u.service_name,
  u.broker_key,
  u.routed_at,
  u.pick_group,
  CASE WHEN u.origin = 'outside' THEN 'drop' ELSE 'delay' END AS outcome,
  CAST(NULL AS STRING) AS route_name,
  CAST(NULL AS STRING) AS address,
  CAST(NULL AS STRING) AS mirror_address,
  CAST(NULL AS STRING) AS database_name,
  CASE WHEN u.broker_key <> '' THEN u.broker_key END AS decision_broker_instance,
  u.match_order,
  5 AS choose_order,
  CAST(NULL AS STRING) AS locate_step,
  'R3.5' AS decided_by,
  1.0 / g.group_count AS weight
FROM unchosen AS u
JOIN pick_group_count AS g
  ON g.origin = u.origin
  AND g.service_name = u.service_name
  AND g.broker_key = u.broker_key
  AND g.routed_at = u.routed_at
UNION ALL
/* R2.4 and R2.7: matching itself decided DELAYED (a result, not an error). From outside */
/* there is nothing to hold the message, so it is dropped (the sender retries). */
SELECT
  k.origin,
  k.service_name,
  k.broker_key,
  k.routed_at,
  '' AS pick_group,
  CASE WHEN k.origin = 'outside' THEN 'drop' ELSE 'delay' END AS outcome,
  CAST(NULL AS STRING) AS route_name,
  CAST(NULL AS STRING) AS address,
  CAST(NULL AS STRING) AS mirror_address,
  CAST(NULL AS STRING) AS database_name,
  CASE WHEN k.broker_key <> '' THEN k.broker_key END AS decision_broker_instance,
  COALESCE(m.match_order, 7) AS match_order,
  CAST(NULL AS INT) AS choose_order,
  CAST(NULL AS STRING) AS locate_step,
  'R2.' || CAST(COALESCE(m.match_order, 7) AS STRING) AS decided_by,
  1.0 AS weight
FROM conversation_key AS k
LEFT JOIN match_step AS m
  ON m.origin = k.origin
  AND m.service_name = k.service_name
  AND m.broker_key = k.broker_key
  AND m.routed_at = k.routed_at
WHERE
  m.match_order IS NULL OR m.match_order = 4

-- stage keyed_option (read 4x)
/* The options with their key's number; the key's own columns are not carried on. */
SELECT
  k.key_id,
  o.pick_group,
  COALESCE(o.route_name, '') AS route_key,
  o.outcome,
  o.route_name,
  o.address,
  o.mirror_address,
  o.database_name,
  o.decision_broker_instance,
  o.match_order,
  o.choose_order,
  o.locate_step,
  o.decided_by
FROM route_option AS o
JOIN decided_key AS k
  ON k.origin = o.origin
  AND k.service_name = o.service_name
  AND COALESCE(k.broker_instance, '') = o.broker_key
  AND k.routed_at = o.routed_at

-- stage ranked_group (read 1x)
/* R2.3: the pick groups of each key, numbered from 0. */
SELECT
  g.key_id,
  g.pick_group,
  DENSE_RANK() OVER (PARTITION BY g.key_id ORDER BY g.pick_group NULLS LAST) - 1 AS group_rank,
  COUNT(*) OVER (PARTITION BY g.key_id) AS group_count
FROM (
  SELECT DISTINCT
    o.key_id,
    o.pick_group
  FROM keyed_option AS o
) AS g

-- stage ranked_route (read 1x)
/* R3: the routes of each pick group (by name), numbered from 0, each with how many */
/* databases (R4.2 options) it has. */
SELECT
  r.key_id,
  r.pick_group,
  r.route_key,
  r.db_count,
  DENSE_RANK() OVER (PARTITION BY r.key_id, r.pick_group ORDER BY r.route_key NULLS LAST) - 1 AS route_rank,
  COUNT(*) OVER (PARTITION BY r.key_id, r.pick_group) AS route_count
FROM (
  SELECT
    o.key_id,
    o.pick_group,
    o.route_key,
    COUNT(*) AS db_count
  FROM keyed_option AS o
  GROUP BY
    o.key_id,
    o.pick_group,
    o.route_key
) AS r

-- stage key_option_count (read 1x)
SELECT
  o.key_id,
  COUNT(*) AS option_count
FROM keyed_option AS o
GROUP BY
  o.key_id

-- stage ranked_option (read 1x)
/* R4.2: the databases of each route, numbered from 0. */
SELECT
  o.*,
  ROW_NUMBER() OVER (
    PARTITION BY o.key_id, o.pick_group, o.route_key
    ORDER BY COALESCE(o.database_name, '') NULLS LAST
  ) - 1 AS db_rank
FROM keyed_option AS o

-- final query
SELECT
  r.key_id,
  r.outcome,
  r.route_name AS route,
  r.address,
  r.mirror_address,
  r.database_name AS `database`,
  r.decision_broker_instance AS broker_instance,
  'R2.' || CAST(r.match_order AS STRING) AS match_step,
  CASE
    WHEN NOT r.choose_order IS NULL
    THEN 'R3.' || CAST(r.choose_order AS STRING)
  END AS choose_step,
  r.locate_step,
  r.decided_by,
  CAST(g.group_rank AS BIGINT) AS group_rank,
  CAST(g.group_count AS BIGINT) AS group_count,
  CAST(t.route_rank AS BIGINT) AS route_rank,
  CAST(t.route_count AS BIGINT) AS route_count,
  CAST(r.db_rank AS BIGINT) AS db_rank,
  CAST(t.db_count AS BIGINT) AS db_count,
  CAST(n.option_count AS BIGINT) AS option_count
FROM ranked_option AS r
JOIN ranked_group AS g
  ON g.key_id = r.key_id AND g.pick_group = r.pick_group
JOIN ranked_route AS t
  ON t.key_id = r.key_id AND t.pick_group = r.pick_group AND t.route_key = r.route_key
JOIN key_option_count AS n
  ON n.key_id = r.key_id
