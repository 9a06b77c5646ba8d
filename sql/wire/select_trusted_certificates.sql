-- The peers' certificates that admit a peer (P6), name -> PEM. A certificate that no
-- principal is bound to admits its peer (Instance.trust, `pybroker trust`, CREATE
-- CERTIFICATE ... FROM FILE without AUTHORIZATION). One bound to principals (its owner, a
-- user of master: AUTHORIZATION; a login FROM CERTIFICATE; a user FOR CERTIFICATE) admits
-- it only while one of them is, or is the user of, a login holding CONNECT on the
-- endpoint (GRANT CONNECT ON ENDPOINT::e TO login, or TO public), as in SQL Server: not
-- disabled (ALTER LOGIN ... DISABLE), and denied it neither itself nor through public
-- (DENY CONNECT beats every GRANT).
WITH endpoint_permissions AS (
    SELECT p.grantee_key, p.state FROM broker_permissions AS p
    WHERE p.database_id = 1 AND p.class_desc = 'ENDPOINT' AND p.permission_name = 'CONNECT'
),
connecting AS (
    SELECT l.name_key FROM server_principals AS l
    WHERE NOT COALESCE(l.is_disabled, FALSE)
        AND EXISTS (SELECT 1 FROM endpoint_permissions AS p
                    WHERE p.state = 'G' AND p.grantee_key IN (l.name_key, 'public'))
        AND NOT EXISTS (SELECT 1 FROM endpoint_permissions AS p
                        WHERE p.state = 'D' AND p.grantee_key IN (l.name_key, 'public'))
),
bound AS (  -- certificate -> the login it connects as (NULL: a principal with no login)
    SELECT l.certificate_name AS certificate_name, l.name_key AS login_key
    FROM server_principals AS l WHERE l.certificate_name IS NOT NULL
    UNION ALL
    SELECT c.name, lower(u.login_name)
    FROM trusted_certificates AS c
    JOIN database_principals AS u
        ON u.database_id = 1 AND u.name_key = lower(c.principal_name)
    UNION ALL
    SELECT u.certificate_name, NULL
    FROM database_principals AS u
    WHERE u.database_id = 1 AND u.certificate_name IS NOT NULL
)
SELECT c.name, c.certificate
FROM trusted_certificates AS c
WHERE (c.principal_name IS NULL
        AND NOT EXISTS (SELECT 1 FROM bound AS b WHERE b.certificate_name = c.name))
    OR EXISTS (SELECT 1 FROM bound AS b
               WHERE b.certificate_name = c.name
                   AND b.login_key IN (SELECT k.name_key FROM connecting AS k))
ORDER BY c.name
