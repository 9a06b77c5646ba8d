-- 003: between instances (SPEC P2, P4, P6, P8, P9, C6): the endpoint's certificate and
-- the peers it trusts, fragments of messages being reassembled, broker events, the
-- connection table an analyst reads, and the receiving side of P8 in the transmission queue.

-- This instance's identity on the wire and its endpoint certificate (created on first
-- need). The private key stays in the file, as SQL Server keeps it in master.
ALTER TABLE instance_settings ADD COLUMN instance_id VARCHAR;
ALTER TABLE instance_settings ADD COLUMN endpoint_certificate VARCHAR;
ALTER TABLE instance_settings ADD COLUMN endpoint_private_key VARCHAR;

-- Peers admitted by their certificate (CREATE CERTIFICATE ... + GRANT CONNECT in SQL
-- Server). Only the validity dates are checked, as SQL Server does.
CREATE TABLE trusted_certificates (
    name                 VARCHAR   PRIMARY KEY,
    certificate          VARCHAR   NOT NULL,
    thumbprint           VARCHAR   NOT NULL UNIQUE,   -- SHA-256 of the DER, hex
    subject              VARCHAR   NOT NULL,
    start_date           TIMESTAMP NOT NULL,
    expiry_date          TIMESTAMP NOT NULL,
    create_date          TIMESTAMP NOT NULL
);

-- P4.4: fragments of a message being reassembled, kept durably as they arrive (each is
-- acknowledged once written), until the message is whole and goes into its queue.
CREATE TABLE message_fragments (
    database_id              INTEGER   NOT NULL,
    conversation_handle      VARCHAR   NOT NULL,   -- the receiving endpoint
    message_sequence_number  BIGINT    NOT NULL,
    fragment_number          INTEGER   NOT NULL,
    fragment_count           INTEGER   NOT NULL,
    message_size             BIGINT    NOT NULL,
    message_type_name        VARCHAR   NOT NULL,
    validation               VARCHAR   NOT NULL,
    is_end_of_dialog         BOOLEAN   NOT NULL,
    is_conversation_error    BOOLEAN   NOT NULL,
    message_body             BLOB,
    arrival_time             TIMESTAMP NOT NULL,
    PRIMARY KEY (conversation_handle, message_sequence_number, fragment_number)
);

-- Connection events, login failures, undeliverable and corrupted messages (SQL Server's
-- Broker:Connection, Audit Broker Login, Broker:Message Undeliverable, Broker:Corrupted
-- Message trace events). Bounded: the engine keeps the newest rows only.
CREATE TABLE broker_events (
    event_id                 BIGINT    PRIMARY KEY,
    event_time               TIMESTAMP NOT NULL,
    event_class              VARCHAR   NOT NULL,
    subclass                 VARCHAR   NOT NULL,
    peer_address             VARCHAR,
    conversation_id          VARCHAR,
    message_sequence_number  BIGINT,
    description              VARCHAR   NOT NULL
);

-- sys.dm_broker_connections, as of the engine's last snapshot (at most a second old while
-- the endpoint runs; emptied when the instance opens and when it closes).
CREATE TABLE broker_connections (
    connection_id              VARCHAR   NOT NULL,
    peer_address               VARCHAR,
    state_desc                 VARCHAR   NOT NULL,
    is_accept                  BOOLEAN   NOT NULL,
    connect_time               TIMESTAMP,
    login_time                 TIMESTAMP,
    last_activity_time         TIMESTAMP,
    authentication_method      VARCHAR,
    principal_name             VARCHAR,
    login_state_desc           VARCHAR,
    encryption_algorithm_desc  VARCHAR,
    total_bytes_sent           BIGINT    NOT NULL,
    total_bytes_received       BIGINT    NOT NULL,
    total_fragments_sent       BIGINT    NOT NULL,
    total_fragments_received   BIGINT    NOT NULL,
    total_sends                BIGINT    NOT NULL,
    total_receives             BIGINT    NOT NULL,
    is_send_flow_controlled    BOOLEAN   NOT NULL
);

-- P8: a message that arrived from another instance for a queue that is OFF waits in the
-- receiving database's transmission queue (acknowledged: it is durably here) until the
-- queue is turned ON. Such rows belong to the receiving endpoint.
ALTER TABLE transmission_queue ADD COLUMN is_inbound BOOLEAN DEFAULT FALSE;
