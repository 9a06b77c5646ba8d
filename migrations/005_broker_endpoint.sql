-- 005: the broker endpoint's definition (P2): what CREATE / ALTER ENDPOINT ... FOR
-- SERVICE_BROKER on master defined, kept in the file as SQL Server keeps it in master, so
-- that `pybroker serve FILE` starts the endpoint the file defines. At most one row: an
-- instance has one Service Broker endpoint. Whether it is listening is not kept: that is
-- a property of the process that opened the file, not of the file.
-- MESSAGE_FORWARD_SIZE writes instance_settings.forwarding_size_mb (R7.3), the one bound
-- forwarding reads, so it is not repeated here.

-- SQL Server numbers the endpoints users create from 65536; so do we.
CREATE SEQUENCE endpoint_id_seq START 65536;

CREATE TABLE broker_endpoints (
    singleton              BOOLEAN   PRIMARY KEY DEFAULT TRUE CHECK (singleton),
    endpoint_id            INTEGER   NOT NULL UNIQUE,
    name                   VARCHAR   NOT NULL,
    state_desc             VARCHAR   NOT NULL
                           CHECK (state_desc IN ('STARTED', 'STOPPED', 'DISABLED')),
    listener_port          INTEGER   NOT NULL CHECK (listener_port BETWEEN 0 AND 65535),
    listener_ip            VARCHAR,              -- NULL: LISTENER_IP = ALL
    certificate_name       VARCHAR,              -- NULL: this instance's own, unnamed
    is_encryption_enabled  BOOLEAN   NOT NULL    -- ENCRYPTION = REQUIRED (TRUE) or DISABLED
);
