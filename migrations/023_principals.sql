-- 023: the principals T-SQL scripts create around Service Broker's certificates, and what
-- they are granted (CREATE LOGIN, CREATE USER, GRANT CONNECT ON ENDPOINT, GRANT SEND ON
-- SERVICE), the database master keys (CREATE MASTER KEY), remote service bindings (CREATE
-- REMOTE SERVICE BINDING), and the user who owns a peer's certificate (CREATE CERTIFICATE
-- ... AUTHORIZATION user FROM FILE). A peer's certificate bound to a login admits the peer
-- only while that login holds CONNECT on the endpoint (sql/wire/select_trusted_certificates.sql).
-- Names are unique without regard to case (name_key: lower case). No password is kept.

-- The owner of a peer's certificate: a user of master (NULL: none was named).
ALTER TABLE trusted_certificates ADD COLUMN principal_name VARCHAR;

-- sys.server_principals: SQL_LOGIN (WITH PASSWORD) or CERTIFICATE_MAPPED_LOGIN (FROM
-- CERTIFICATE, certificate_name names a row of trusted_certificates).
CREATE TABLE server_principals (
    principal_id      INTEGER   NOT NULL,
    name              VARCHAR   NOT NULL,
    name_key          VARCHAR   PRIMARY KEY,
    type_desc         VARCHAR   NOT NULL,
    certificate_name  VARCHAR,
    create_date       TIMESTAMP NOT NULL
);

-- sys.database_principals: SQL_USER (FOR LOGIN login_name, or WITHOUT LOGIN: no login) or
-- CERTIFICATE_MAPPED_USER (FOR CERTIFICATE certificate_name, on master).
CREATE TABLE database_principals (
    database_id       INTEGER   NOT NULL,
    principal_id      INTEGER   NOT NULL,
    name              VARCHAR   NOT NULL,
    name_key          VARCHAR   NOT NULL,
    type_desc         VARCHAR   NOT NULL,
    login_name        VARCHAR,
    certificate_name  VARCHAR,
    create_date       TIMESTAMP NOT NULL,
    PRIMARY KEY (database_id, name_key)
);

-- GRANT CONNECT ON ENDPOINT::e (class ENDPOINT, on master) and GRANT SEND ON SERVICE::s
-- (class SERVICE, in the service's database) to a principal (grantee_key 'public': all).
CREATE TABLE broker_permissions (
    database_id      INTEGER   NOT NULL,
    class_desc       VARCHAR   NOT NULL,
    object_name      VARCHAR   NOT NULL,
    permission_name  VARCHAR   NOT NULL,
    grantee          VARCHAR   NOT NULL,
    grantee_key      VARCHAR   NOT NULL,
    create_date      TIMESTAMP NOT NULL,
    PRIMARY KEY (database_id, class_desc, object_name, permission_name, grantee_key)
);

-- CREATE MASTER KEY ENCRYPTION BY PASSWORD: that the database has one (the password is not
-- kept: pybroker keeps private keys in the instance file, as docs/tsql.md says).
CREATE TABLE database_master_keys (
    database_id  INTEGER   PRIMARY KEY,
    create_date  TIMESTAMP NOT NULL
);

-- CREATE REMOTE SERVICE BINDING: the user whose certificate would secure dialogs to a
-- far service (sys.remote_service_bindings).
CREATE TABLE remote_service_bindings (
    database_id          INTEGER   NOT NULL,
    name                 VARCHAR   NOT NULL,
    name_key             VARCHAR   NOT NULL,
    remote_service_name  VARCHAR   NOT NULL,
    user_name            VARCHAR   NOT NULL,
    is_anonymous_on      BOOLEAN   NOT NULL,
    create_date          TIMESTAMP NOT NULL,
    PRIMARY KEY (database_id, name_key)
);
