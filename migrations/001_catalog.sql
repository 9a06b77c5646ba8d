-- 001: the instance catalog that routing reads (SPEC R1, R10, R7.3).
-- GUIDs are stored as lowercase text, not UUID, and times as TIMESTAMP in UTC: both survive
-- DuckDB -> Parquet -> Spark unchanged, which the pipeline relies on.

CREATE TABLE schema_migrations (
    version     INTEGER PRIMARY KEY,
    name        VARCHAR   NOT NULL,
    applied_at  TIMESTAMP NOT NULL
);

-- One row: the instance-wide settings (R7.3: forwarding off by default, 10 MB bound).
CREATE TABLE instance_settings (
    singleton                   BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (singleton),
    is_forwarding_enabled       BOOLEAN NOT NULL DEFAULT FALSE,
    forwarding_size_mb          INTEGER NOT NULL DEFAULT 10 CHECK (forwarding_size_mb > 0)
);
INSERT INTO instance_settings DEFAULT VALUES;

CREATE TABLE databases (
    database_id          INTEGER   PRIMARY KEY,
    name                 VARCHAR   NOT NULL UNIQUE,
    service_broker_guid  VARCHAR   NOT NULL UNIQUE,
    is_broker_enabled    BOOLEAN   NOT NULL DEFAULT TRUE,
    create_date          TIMESTAMP NOT NULL
);

CREATE TABLE service_queues (
    database_id          INTEGER   NOT NULL,
    name                 VARCHAR   NOT NULL,
    is_receive_enabled   BOOLEAN   NOT NULL DEFAULT TRUE,
    is_enqueue_enabled   BOOLEAN   NOT NULL DEFAULT TRUE,
    create_date          TIMESTAMP NOT NULL,
    PRIMARY KEY (database_id, name)
);

CREATE TABLE services (
    database_id          INTEGER   NOT NULL,
    name                 VARCHAR   NOT NULL,
    queue_name           VARCHAR   NOT NULL,
    create_date          TIMESTAMP NOT NULL,
    PRIMARY KEY (database_id, name)
);

-- SQL Server numbers routes from 65536; so do we.
CREATE SEQUENCE route_id_seq START 65536;

CREATE TABLE routes (
    database_id          INTEGER   NOT NULL,
    route_id             INTEGER   NOT NULL UNIQUE,
    name                 VARCHAR   NOT NULL,
    remote_service_name  VARCHAR,              -- NULL matches any service
    broker_instance      VARCHAR,              -- NULL matches any broker identifier
    lifetime             TIMESTAMP,            -- UTC expiry; NULL never expires (R1.4)
    address              VARCHAR   NOT NULL,   -- 'LOCAL', 'TRANSPORT' or tcp://host:port
    mirror_address       VARCHAR,
    create_date          TIMESTAMP NOT NULL,
    PRIMARY KEY (database_id, name)
);

-- R2.4 / R8.2: a pending request to the dynamic routing service for a missing service.
-- Matching reads it (R2.4 is skipped while a request is pending); dynamic routing writes it.
CREATE TABLE route_requests (
    database_id          INTEGER   NOT NULL,
    service_name         VARCHAR   NOT NULL,
    requested_at         TIMESTAMP NOT NULL,
    PRIMARY KEY (database_id, service_name)
);

-- master (1) and msdb (4) exist in every instance, with SQL Server's database ids.
INSERT INTO databases VALUES
    (1, 'master', lower(CAST(gen_random_uuid() AS VARCHAR)), TRUE, CAST(timezone('UTC', current_timestamp) AS TIMESTAMP)),
    (4, 'msdb',   lower(CAST(gen_random_uuid() AS VARCHAR)), TRUE, CAST(timezone('UTC', current_timestamp) AS TIMESTAMP));

-- R1.3: every database except master has AutoCreatedLocal.
INSERT INTO routes VALUES
    (4, nextval('route_id_seq'), 'AutoCreatedLocal', NULL, NULL, NULL, 'LOCAL', NULL,
     CAST(timezone('UTC', current_timestamp) AS TIMESTAMP));
