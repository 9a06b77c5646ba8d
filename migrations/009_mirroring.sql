-- 009: mirrored pairs (R9). pybroker has no database mirroring to copy, so a database's
-- part in a pair is a setting: its role (PRINCIPAL or MIRROR) and its partner's address,
-- kept until changed (Database.set_mirroring, ALTER DATABASE ... SET PARTNER). A database
-- with no row is not mirrored. The two partners share one broker identifier, as SQL
-- Server's do (create_database(name, broker_instance=...)).
CREATE TABLE database_mirroring (
    database_id             INTEGER   PRIMARY KEY,
    mirroring_role          VARCHAR   NOT NULL CHECK (mirroring_role IN ('PRINCIPAL', 'MIRROR')),
    mirroring_partner_name  VARCHAR   NOT NULL,
    role_change_time        TIMESTAMP NOT NULL
);

-- sys.dm_broker_mirrored_routes (R9.2-R9.4), as of the engine's last snapshot of what the
-- broker endpoint knows of each mirrored pair it sends to (at most a second old while the
-- endpoint runs; emptied when the instance opens and when its endpoint closes).
CREATE TABLE broker_mirrored_routes (
    address               VARCHAR   NOT NULL,
    mirror_address        VARCHAR   NOT NULL,
    service_name          VARCHAR   NOT NULL,
    broker_instance       VARCHAR,
    state_desc            VARCHAR   NOT NULL,
    principal_address     VARCHAR,
    since                 TIMESTAMP NOT NULL,
    last_probe_time       TIMESTAMP,
    address_answer        VARCHAR,
    mirror_address_answer VARCHAR
);
