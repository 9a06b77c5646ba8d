-- sys.server_principals: the logins (CREATE LOGIN), with the peer's certificate a
-- CERTIFICATE_MAPPED_LOGIN is mapped to, and whether ALTER LOGIN ... DISABLE disabled it.
-- No password is kept.
CREATE OR REPLACE VIEW sys.server_principals AS
SELECT l.name, l.principal_id, l.type_desc, l.certificate_name, l.create_date,
    COALESCE(l.is_disabled, FALSE) AS is_disabled
FROM main.server_principals AS l
