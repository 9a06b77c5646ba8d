-- 025: the built-in contract of event notifications and its message type in every
-- database (SPEC C8: external activation posts a QUEUE_ACTIVATION event on
-- http://schemas.microsoft.com/SQL/Notifications/PostEventNotification), and what REVOKE,
-- DENY, ALTER LOGIN and ALTER CERTIFICATE keep (migrations/023).

-- C8: SQL Server's system objects of the same names; EventNotification is sent by the
-- initiator only (the broker posting the event), and is well-formed XML. A database that
-- already holds an object of one of these names keeps its own.
INSERT INTO message_types
SELECT d.database_id, 'http://schemas.microsoft.com/SQL/Notifications/EventNotification', 'X',
    TRUE, CAST(timezone('UTC', current_timestamp) AS TIMESTAMP)
FROM databases AS d
WHERE NOT EXISTS (
    SELECT 1 FROM message_types AS t
    WHERE t.database_id = d.database_id
        AND t.name = 'http://schemas.microsoft.com/SQL/Notifications/EventNotification');

INSERT INTO service_contracts
SELECT d.database_id, 'http://schemas.microsoft.com/SQL/Notifications/PostEventNotification',
    TRUE, CAST(timezone('UTC', current_timestamp) AS TIMESTAMP)
FROM databases AS d
WHERE NOT EXISTS (
    SELECT 1 FROM service_contracts AS c
    WHERE c.database_id = d.database_id
        AND c.name = 'http://schemas.microsoft.com/SQL/Notifications/PostEventNotification');

INSERT INTO service_contract_message_usages
SELECT c.database_id, c.name, 'http://schemas.microsoft.com/SQL/Notifications/EventNotification',
    TRUE, FALSE
FROM service_contracts AS c
WHERE c.is_system
    AND c.name = 'http://schemas.microsoft.com/SQL/Notifications/PostEventNotification'
    AND NOT EXISTS (
        SELECT 1 FROM service_contract_message_usages AS u
        WHERE u.database_id = c.database_id AND u.contract_name = c.name);

-- GRANT or DENY (SQL Server's state: 'G' GRANT, 'D' DENY). A principal holds one of them
-- per permission: DENY replaces a GRANT and GRANT a DENY; REVOKE removes either. No default
-- (ADD COLUMN then UPDATE commits on a file whose table has rows, as 024 says).
ALTER TABLE broker_permissions ADD COLUMN state VARCHAR;
UPDATE broker_permissions SET state = 'G';

-- ALTER LOGIN ... DISABLE: a disabled login connects nothing (is_disabled in
-- sys.server_principals).
ALTER TABLE server_principals ADD COLUMN is_disabled BOOLEAN;
UPDATE server_principals SET is_disabled = FALSE;

-- ALTER CERTIFICATE ... WITH ACTIVE FOR BEGIN_DIALOG = ON | OFF (sys.certificates'
-- is_active_for_begin_dialog); NULL is ON, the value a certificate is created with.
ALTER TABLE trusted_certificates ADD COLUMN is_active_for_begin_dialog BOOLEAN;
