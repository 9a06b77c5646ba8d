{#-
  pipeline resolve, stage 2: the routing keys of the conversations, far fewer than
  conversations, each numbered once (key_id) so that every later join compares one integer.

  A key is (origin, service_name, broker_key, epoch): broker identifiers in lower case (as
  the live engine normalizes them, '' for none) and the epoch of route_epochs.sql that the
  begin_time falls in, for the routing database (R1.1: the origin's; R1.2: msdb for
  'outside') and service. Conversations are grouped by (origin, service_name, broker_key)
  first, with their first and last begin_time: a group gets the epochs its span overlaps,
  so the routing steps run on no epoch that no conversation of the group begins in (at
  worst a few between its first and last). routed_at is the epoch's start; the epoch runs
  to epoch_last inclusive (the instant before the next epoch, or the largest timestamp), so
  that conversations find their key with an equality join and two comparisons.

  Keys of a wildcard class share one decision: a key that no live route of its service
  matches (R2.1-R2.3), that R2.4 does not delay (no live route to the dynamic routing
  service, or a route request for the service pending), whose service is no service of the
  instance and does not begin with a tcp:// address (R10.6), is decided exactly like every
  other such key of the same origin and epoch: R2.5 takes the same wildcards, R2.6 and R4
  find no service, R3 chooses among the same candidates. Only whether a broker identifier
  is named changes the decision (the identifier itself is carried into the decision, see
  decide_conversations.sql). Such keys are decided once per class, through its least key
  (decided_service_name, decided_broker_key); any other key is decided for itself. The
  live engine shares decisions among unknown services the same way (routing/cache.py,
  is_class_member).
  Each key also carries key_hash, a 64-bit hash of its text (_id_hash.sql), and
  key_hash_shared: whether two texts of these conversations (routed or not) share a hash.
  When none do, a conversation's hash names its own text's keys and no other, and
  decide_conversations.sql finds its key by the hash (one integer a row); otherwise by
  the texts (pybroker/apps/pipeline/resolve.py reads the flag).
  Inputs: {{ conversations }}, {{ epochs }} (small), {{ databases }}, {{ routes }},
  {{ route_requests }}, {{ services }}; engine: {{ engine }}.
-#}
{% from 'pipeline/_id_hash.sql' import key_hash %}
WITH conversation_group AS (
    SELECT
        c.origin,
        c.service_name,
        COALESCE(lower(c.broker_instance), '') AS broker_key,
        MIN(c.begin_time) AS first_begin,
        MAX(c.begin_time) AS last_begin
    FROM {{ conversations }} AS c
    WHERE c.begin_time IS NOT NULL
    GROUP BY c.origin, c.service_name, COALESCE(lower(c.broker_instance), '')
),
hashed_group AS (
    SELECT g.*,
        {{ key_hash('g.origin', 'g.service_name', 'g.broker_key', engine,
                    key_hash_bits | default(64)) }} AS key_hash
    FROM conversation_group AS g
),
hash_sharing AS (
    -- one row: whether two texts share a hash (a conversation without a begin_time finds
    -- no key by either join: its time is in no epoch)
    SELECT COUNT(DISTINCT h.key_hash) < COUNT(*) AS key_hash_shared
    FROM hashed_group AS h
),
routed_group AS (
    SELECT g.*, d.database_id AS routing_database_id
    FROM hashed_group AS g
    JOIN {{ databases }} AS d
        ON d.name = CASE WHEN g.origin = 'outside' THEN 'msdb' ELSE g.origin END
),
own_expiry AS (
    SELECT DISTINCT e.database_id, e.service_name
    FROM {{ epochs }} AS e
    WHERE e.service_name IS NOT NULL
),
group_epoch AS (
    -- A service with expiring routes of its own has its own epochs, any other the
    -- database-wide ones (two plain joins: an outer join with range conditions becomes a
    -- nested-loop join in DuckDB).
    SELECT g.key_hash, g.origin, g.service_name, g.broker_key, g.routing_database_id,
        e.routed_at, e.epoch_end
    FROM routed_group AS g
    JOIN {{ epochs }} AS e
        ON e.database_id = g.routing_database_id AND e.service_name = g.service_name
    WHERE e.routed_at <= g.last_begin
        AND (e.epoch_end IS NULL OR e.epoch_end > g.first_begin)
    UNION ALL
    SELECT g.key_hash, g.origin, g.service_name, g.broker_key, g.routing_database_id,
        e.routed_at, e.epoch_end
    FROM routed_group AS g
    LEFT JOIN own_expiry AS o
        ON o.database_id = g.routing_database_id AND o.service_name = g.service_name
    JOIN {{ epochs }} AS e
        ON e.database_id = g.routing_database_id AND e.service_name IS NULL
    WHERE o.database_id IS NULL
        AND e.routed_at <= g.last_begin
        AND (e.epoch_end IS NULL OR e.epoch_end > g.first_begin)
),
service_match AS (
    -- Keys that R2.1-R2.3 decide: a live route of the routing database for the service
    -- that the key takes (as matched_by_service_route of _route_steps.sql).
    SELECT DISTINCT k.origin, k.service_name, k.broker_key, k.routed_at
    FROM group_epoch AS k
    JOIN {{ routes }} AS r
        ON r.database_id = k.routing_database_id AND r.remote_service_name = k.service_name
    WHERE (r.lifetime IS NULL OR r.lifetime > k.routed_at)
        AND (k.broker_key = '' OR COALESCE(r.broker_instance, '') = ''
            OR COALESCE(r.broker_instance, '') = k.broker_key)
),
dynamic_route AS (
    -- Routing databases and epochs with a live route to the dynamic routing service (R2.4).
    SELECT DISTINCT k.routing_database_id, k.routed_at
    FROM group_epoch AS k
    JOIN {{ routes }} AS r
        ON r.database_id = k.routing_database_id
        AND r.remote_service_name = 'SQL/ServiceBroker/BrokerConfiguration'
    WHERE r.lifetime IS NULL OR r.lifetime > k.routed_at
),
requested_service AS (
    SELECT DISTINCT q.database_id, q.service_name
    FROM {{ route_requests }} AS q
),
existing_service AS (
    -- Services of the instance (R2.6, R4 locate them in any database).
    SELECT DISTINCT s.name AS service_name
    FROM {{ services }} AS s
),
classified AS (
    SELECT
        k.*,
        m.origin IS NULL
            AND (y.routing_database_id IS NULL OR q.service_name IS NOT NULL)
            AND x.service_name IS NULL
            AND REGEXP_EXTRACT(k.service_name, '^([tT][cC][pP]://[^/:]+:[0-9]+)', 1) = ''
            AS in_class
    FROM group_epoch AS k
    LEFT JOIN service_match AS m
        ON m.origin = k.origin AND m.service_name = k.service_name
        AND m.broker_key = k.broker_key AND m.routed_at = k.routed_at
    LEFT JOIN dynamic_route AS y
        ON y.routing_database_id = k.routing_database_id AND y.routed_at = k.routed_at
    LEFT JOIN requested_service AS q
        ON q.database_id = k.routing_database_id AND q.service_name = k.service_name
    LEFT JOIN existing_service AS x ON x.service_name = k.service_name
),
decided AS (
    -- A class is decided through its least key (service name, then broker identifier).
    SELECT
        k.key_hash, k.origin, k.service_name, k.broker_key, k.routed_at, k.epoch_end,
        k.in_class,
        CASE WHEN k.in_class THEN FIRST_VALUE(k.service_name) OVER w
            ELSE k.service_name END AS decided_service_name,
        CASE WHEN k.in_class THEN FIRST_VALUE(k.broker_key) OVER w
            ELSE k.broker_key END AS decided_broker_key
    FROM classified AS k
    WINDOW w AS (
        PARTITION BY k.origin, k.routed_at, k.in_class, k.broker_key = ''
        ORDER BY k.service_name, k.broker_key
        ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING
    )
)
SELECT
    d.origin,
    d.service_name,
    d.broker_key,
    d.routed_at,
    COALESCE(d.epoch_end - INTERVAL 1 MICROSECOND,
        CAST('9999-12-31 23:59:59.999999' AS TIMESTAMP)) AS epoch_last,
    d.in_class,
    d.decided_service_name,
    d.decided_broker_key,
    DENSE_RANK() OVER (
        ORDER BY d.origin, d.decided_service_name, d.decided_broker_key, d.routed_at
    ) AS key_id,
    d.key_hash,
    s.key_hash_shared
FROM decided AS d
CROSS JOIN hash_sharing AS s
