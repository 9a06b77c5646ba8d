{#-
  diagnose(): the findings of pybroker diagnose that one instance's own tables decide, computed
  over this instance alone (pybroker/docs/diagnose.md, "The findings as SQL"). Each row is a
  finding: its code, severity and title (those of pybroker/apps/diagnose/rules.py), the
  database (NULL: the instance as a whole), the objects involved (as `kind name`), how many
  things it counts and one line of detail; `pybroker explain CODE` says what happens and
  the fix. The thresholds are diagnose's, with its defaults: at_time (UTC; NULL: now),
  leak_age and idle_age in seconds, leak_count. sys.dm_broker_findings is diagnose() now.
-#}
CREATE OR REPLACE MACRO diagnose(at_time := NULL, leak_age := 3600, leak_count := 100,
    idle_age := 86400) AS TABLE
WITH settings AS (
    SELECT
        COALESCE(CAST(at_time AS TIMESTAMP),
            CAST(timezone('UTC', current_timestamp) AS TIMESTAMP)) AS judged_at,
        COALESCE(CAST(at_time AS TIMESTAMP),
            CAST(timezone('UTC', current_timestamp) AS TIMESTAMP))
            - to_seconds(CAST(leak_age AS DOUBLE)) AS leak_before,
        COALESCE(CAST(at_time AS TIMESTAMP),
            CAST(timezone('UTC', current_timestamp) AS TIMESTAMP))
            - to_seconds(CAST(idle_age AS DOUBLE)) AS idle_before,
        CAST(leak_count AS BIGINT) AS min_count
),
rules (code, severity, title) AS (VALUES
    ('D-CFG-003', 'error', 'a queue is OFF'),
    ('D-CFG-005', 'warning', 'the broker endpoint is not started'),
    ('D-CFG-007', 'error', 'a peer certificate has expired'),
    ('D-CFG-008', 'warning', 'a peer certificate expires within 30 days'),
    ('D-CFG-010', 'error', 'forwarding is needed but off (R3.6, R7.3)'),
    ('D-CNV-001', 'warning', 'DISCONNECTED_INBOUND endpoints pile up'),
    ('D-CNV-002', 'warning', 'old CONVERSING endpoints pile up'),
    ('D-CNV-005', 'warning', 'messages wait in the transmission queue for long'),
    ('D-CNV-006', 'warning', 'conversation endpoints with no traffic for long'),
    ('D-CNV-007', 'warning', 'initiators end before their targets (fire and forget)'),
    ('D-CNV-008', 'warning', 'a target service never ends its dialogs'),
    ('D-CNV-009', 'info', 'CLOSED endpoints kept long')
),
-- the addresses this instance listens on, spelt as routes are compared (LISTENER_IP = ALL
-- is 127.0.0.1; a dynamic port is not in the file)
own_addresses AS (
    SELECT 'tcp://' || lower(COALESCE(t.ip_address, '127.0.0.1')) || ':' || t.port AS address
    FROM sys.tcp_endpoints AS t
    WHERE t.port <> 0
),
msdb_routes AS (
    SELECT r.name, r.remote_service_name, r.address,
        regexp_replace(lower(rtrim(trim(r.address), '/')), '^tcp://localhost:',
            'tcp://127.0.0.1:') AS normal_address
    FROM sys.routes AS r
    WHERE r.database_name = 'msdb' AND NOT r.is_expired
        AND lower(trim(r.address)) LIKE 'tcp://%'
),
last_traffic AS (
    SELECT e.database_name, e.state_desc,
        greatest(e.create_date, max(m.message_enqueue_time), max(t.enqueue_time),
            max(b.event_time)) AS last_traffic
    FROM sys.conversation_endpoints AS e
    CROSS JOIN settings AS s
    LEFT JOIN sys.queue_messages AS m ON m.conversation_handle = e.conversation_handle
    LEFT JOIN sys.transmission_queue AS t ON t.conversation_handle = e.conversation_handle
    LEFT JOIN sys.broker_events AS b ON b.conversation_id = e.conversation_id
    WHERE e.state_desc NOT IN ('CLOSED', 'ERROR')
        AND (e.dialog_timer IS NULL OR e.dialog_timer < s.idle_before)
    GROUP BY e.database_name, e.state_desc, e.conversation_handle, e.create_date
),
found AS (
    -- D-CFG-003: RECEIVE fails (C3)
    SELECT 'D-CFG-003' AS code, q.database_name, ['queue ' || q.name] AS objects,
        1::BIGINT AS count, 'the queue is OFF' AS detail
    FROM sys.service_queues AS q
    WHERE NOT q.is_receive_enabled
    UNION ALL
    -- D-CFG-005 (P2)
    SELECT 'D-CFG-005', NULL, ['endpoint ' || e.name], 1, 'the endpoint is ' || e.state_desc
    FROM sys.service_broker_endpoints AS e
    WHERE e.state_desc <> 'STARTED'
    UNION ALL
    -- D-CFG-007, D-CFG-008: a trusted peer's certificate, judged at judged_at
    SELECT CASE WHEN c.expiry_date <= s.judged_at THEN 'D-CFG-007' ELSE 'D-CFG-008' END,
        NULL, ['certificate ' || c.name], 1,
        format('{} expires {}', c.subject, strftime(c.expiry_date, '%Y-%m-%d %H:%M'))
    FROM sys.certificates AS c
    CROSS JOIN settings AS s
    WHERE c.expiry_date <= s.judged_at + INTERVAL 30 DAY
    UNION ALL
    -- D-CFG-010: an msdb route to another address while forwarding is off (R3.6, R7.3)
    SELECT 'D-CFG-010', 'msdb', ['route ' || r.name], 1,
        format('msdb routes {} to {}', COALESCE(r.remote_service_name, 'every service'),
            r.normal_address)
    FROM msdb_routes AS r
    CROSS JOIN main.instance_settings AS i
    WHERE NOT i.is_forwarding_enabled
        AND r.normal_address NOT IN (SELECT o.address FROM own_addresses AS o)
    UNION ALL
    -- D-CNV-001, D-CNV-002, D-CNV-009: endpoints older than leak_age piling up in one state
    SELECT CASE e.state_desc WHEN 'DISCONNECTED_INBOUND' THEN 'D-CNV-001'
            WHEN 'CONVERSING' THEN 'D-CNV-002' ELSE 'D-CNV-009' END,
        e.database_name, [e.state_desc || ' endpoints'], count(*),
        format('{} endpoints {} older than leak_age', count(*), e.state_desc)
    FROM sys.conversation_endpoints AS e
    CROSS JOIN settings AS s
    WHERE e.state_desc IN ('DISCONNECTED_INBOUND', 'CONVERSING', 'CLOSED')
        AND e.create_date < s.leak_before
    GROUP BY e.database_name, e.state_desc
    HAVING count(*) >= any_value(s.min_count)
    UNION ALL
    -- D-CNV-005: messages waiting longer than leak_age, by status text (C4)
    SELECT 'D-CNV-005', t.database_name,
        [format('transmission queue ({:,} message(s))', count(DISTINCT (t.conversation_handle,
            t.message_sequence_number)))],
        count(DISTINCT (t.conversation_handle, t.message_sequence_number)),
        format('since {} with the status: {}', strftime(min(t.enqueue_time),
            '%Y-%m-%d %H:%M:%S'), CASE WHEN t.transmission_status = '' THEN '(blank)'
            ELSE t.transmission_status END)
    FROM sys.transmission_queue AS t
    CROSS JOIN settings AS s
    WHERE t.enqueue_time < s.leak_before
    GROUP BY t.database_name, t.transmission_status
    UNION ALL
    -- D-CNV-006: no traffic known for longer than idle_age
    SELECT 'D-CNV-006', l.database_name,
        [format('{} endpoints ({:,} idle)', l.state_desc, count(*))], count(*),
        format('no traffic known since {}', strftime(min(l.last_traffic),
            '%Y-%m-%d %H:%M:%S'))
    FROM last_traffic AS l
    CROSS JOIN settings AS s
    WHERE l.last_traffic < s.idle_before
    GROUP BY l.database_name, l.state_desc
    UNION ALL
    -- D-CNV-007: targets DISCONNECTED_INBOUND, their initiator ended first (C1)
    SELECT 'D-CNV-007', e.database_name,
        ['service ' || e.service_name, 'far service ' || e.far_service,
            format('DISCONNECTED_INBOUND endpoints ({:,})', count(*))], count(*),
        format('{} dialog(s) from {} to {} ended by the initiator first', count(*),
            e.far_service, e.service_name)
    FROM sys.conversation_endpoints AS e
    WHERE NOT e.is_initiator AND e.state_desc = 'DISCONNECTED_INBOUND'
    GROUP BY e.database_name, e.service_name, e.far_service
    UNION ALL
    -- D-CNV-008: a target service's endpoints older than leak_age, not ended
    SELECT 'D-CNV-008', e.database_name, ['service ' || e.service_name], count(*),
        format('{} target endpoint(s) older than leak_age not ended', count(*))
    FROM sys.conversation_endpoints AS e
    CROSS JOIN settings AS s
    WHERE NOT e.is_initiator AND e.state_desc IN ('CONVERSING', 'DISCONNECTED_INBOUND')
        AND e.create_date < s.leak_before
    GROUP BY e.database_name, e.service_name
    HAVING count(*) >= any_value(s.min_count)
)
SELECT f.code, r.severity, r.title, f.database_name, f.objects, f.count, f.detail
FROM found AS f
JOIN rules AS r ON r.code = f.code
ORDER BY CASE r.severity WHEN 'error' THEN 0 WHEN 'warning' THEN 1 ELSE 2 END, f.code,
    f.database_name NULLS FIRST, f.objects
