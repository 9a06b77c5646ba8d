-- 002: conversations (SPEC C1-C5, P3, P5, P8): message types, contracts, the contracts a
-- service accepts, conversation endpoints, queue contents and the transmission queue.
-- As in 001: GUIDs are lowercase VARCHAR, times naive-UTC TIMESTAMP, bodies BLOB; names are
-- stored, not ids, so an exported table reads on its own.

-- Settings that conversations read. ALTER TABLE ... ADD COLUMN cannot carry NOT NULL in
-- DuckDB 1.5; the defaults fill every row.
ALTER TABLE instance_settings ADD COLUMN max_message_size BIGINT DEFAULT 2147483647;

-- C3: RETENTION and POISON_MESSAGE_HANDLING (STATUS) of CREATE/ALTER QUEUE, SQL Server's
-- defaults (retention off, poison-message handling on).
ALTER TABLE service_queues ADD COLUMN is_retention_enabled BOOLEAN DEFAULT FALSE;
ALTER TABLE service_queues ADD COLUMN is_poison_message_handling_enabled BOOLEAN DEFAULT TRUE;

-- C2: validation is SQL Server's code: 'N' NONE, 'E' EMPTY, 'X' WELL_FORMED_XML.
CREATE TABLE message_types (
    database_id          INTEGER   NOT NULL,
    name                 VARCHAR   NOT NULL,
    validation           VARCHAR   NOT NULL CHECK (validation IN ('N', 'E', 'X')),
    is_system            BOOLEAN   NOT NULL,
    create_date          TIMESTAMP NOT NULL,
    PRIMARY KEY (database_id, name)
);

CREATE TABLE service_contracts (
    database_id          INTEGER   NOT NULL,
    name                 VARCHAR   NOT NULL,
    is_system            BOOLEAN   NOT NULL,
    create_date          TIMESTAMP NOT NULL,
    PRIMARY KEY (database_id, name)
);

-- Which message types a contract allows, and which side may send each (SENT BY).
CREATE TABLE service_contract_message_usages (
    database_id          INTEGER   NOT NULL,
    contract_name        VARCHAR   NOT NULL,
    message_type_name    VARCHAR   NOT NULL,
    is_sent_by_initiator BOOLEAN   NOT NULL,
    is_sent_by_target    BOOLEAN   NOT NULL,
    PRIMARY KEY (database_id, contract_name, message_type_name)
);

-- The contracts a service accepts as a target (none: it can only initiate).
CREATE TABLE service_contract_usages (
    database_id          INTEGER   NOT NULL,
    service_name         VARCHAR   NOT NULL,
    contract_name        VARCHAR   NOT NULL,
    PRIMARY KEY (database_id, service_name, contract_name)
);

-- C1: one row per side of a conversation held in this instance. The send/receive/ack columns
-- are the dialog protocol's state (P3, P5): send_sequence is the next number to send,
-- receive_sequence the next expected, receive_sequence_frag the next fragment of it, and
-- first_unacked_send_sequence the lowest number the far side has not acknowledged (a
-- transmission queue row leaves when it is acknowledged; local delivery acknowledges at
-- enqueue). The transmission_* columns are the retry state of the endpoint's transmission
-- object (P7, C5). state is one of SO SI CO DI DO ER CD (pybroker/conversation/states.py).
CREATE TABLE conversation_endpoints (
    conversation_handle         VARCHAR   PRIMARY KEY,
    database_id                 INTEGER   NOT NULL,
    conversation_id             VARCHAR   NOT NULL,
    conversation_group_id       VARCHAR   NOT NULL,
    is_initiator                BOOLEAN   NOT NULL,
    service_name                VARCHAR   NOT NULL,
    service_contract_name       VARCHAR   NOT NULL,
    far_service                 VARCHAR   NOT NULL,
    far_broker_instance         VARCHAR,            -- NULL until known; pins routing (R5)
    requested_broker_instance   VARCHAR,            -- BEGIN DIALOG's broker instance, if any
    state                       VARCHAR   NOT NULL,
    lifetime                    TIMESTAMP NOT NULL, -- expiry (C1: default 2^31 s)
    dialog_timer                TIMESTAMP,          -- NULL: no timer set
    send_sequence               BIGINT    NOT NULL,
    first_unacked_send_sequence BIGINT    NOT NULL,
    end_dialog_sequence         BIGINT,             -- sequence of the EndDialog/Error sent
    receive_sequence            BIGINT    NOT NULL,
    receive_sequence_frag       INTEGER   NOT NULL,
    transmission_retry_count    INTEGER   NOT NULL,
    transmission_next_attempt   TIMESTAMP,          -- NULL: nothing waiting to be sent
    error_code                  INTEGER,            -- the error that ended it, if any
    error_description           VARCHAR,
    priority                    TINYINT   NOT NULL,
    create_date                 TIMESTAMP NOT NULL
);

-- The contents of every queue (one table; SQL Server has one internal table per queue).
-- status: 0 retained (received, queue has RETENTION), 1 ready, 2 incomplete or out of order
-- (P4.4, not yet receivable), 3 retained copy of a sent message. queuing_order is unique
-- in the instance and orders a queue.
CREATE TABLE queue_messages (
    database_id              INTEGER   NOT NULL,
    queue_name               VARCHAR   NOT NULL,
    queuing_order            BIGINT    NOT NULL,
    status                   TINYINT   NOT NULL,
    priority                 TINYINT   NOT NULL,
    conversation_group_id    VARCHAR   NOT NULL,
    conversation_handle      VARCHAR   NOT NULL,   -- the receiving endpoint
    message_sequence_number  BIGINT    NOT NULL,   -- -1: a local, unsequenced message
    service_name             VARCHAR   NOT NULL,
    service_contract_name    VARCHAR   NOT NULL,
    message_type_name        VARCHAR   NOT NULL,
    validation               VARCHAR   NOT NULL,
    message_body             BLOB,
    message_enqueue_time     TIMESTAMP NOT NULL
);

-- C4, P8: messages that have not left (not yet acknowledged by the far side), in the
-- sending database. Fragment columns are for the wire protocol (P4): a local message is one
-- fragment (fragment_number 0 of fragment_count 1, message_size bytes in all).
CREATE TABLE transmission_queue (
    database_id              INTEGER   NOT NULL,
    conversation_handle      VARCHAR   NOT NULL,   -- the sending endpoint
    message_sequence_number  BIGINT    NOT NULL,
    fragment_number          INTEGER   NOT NULL,
    fragment_count           INTEGER   NOT NULL,
    message_size             BIGINT    NOT NULL,
    to_service_name          VARCHAR   NOT NULL,
    to_broker_instance       VARCHAR,
    from_service_name        VARCHAR   NOT NULL,
    service_contract_name    VARCHAR   NOT NULL,
    message_type_name        VARCHAR   NOT NULL,
    validation               VARCHAR   NOT NULL,
    is_end_of_dialog         BOOLEAN   NOT NULL,
    is_conversation_error    BOOLEAN   NOT NULL,
    priority                 TINYINT   NOT NULL,
    enqueue_time             TIMESTAMP NOT NULL,
    message_body             BLOB,
    transmission_status      VARCHAR   NOT NULL    -- '' while nothing went wrong (C4)
);

-- C2: the system message types and contracts exist in every database (master and msdb
-- included); sql/conversation/insert_system_*.sql adds them to each new database.
INSERT INTO message_types
SELECT d.database_id, t.name, t.validation, TRUE,
    CAST(timezone('UTC', current_timestamp) AS TIMESTAMP)
FROM databases AS d
CROSS JOIN (VALUES
    ('DEFAULT', 'N'),
    ('http://schemas.microsoft.com/SQL/ServiceBroker/EndDialog', 'E'),
    ('http://schemas.microsoft.com/SQL/ServiceBroker/Error', 'X'),
    ('http://schemas.microsoft.com/SQL/ServiceBroker/DialogTimer', 'E'),
    ('http://schemas.microsoft.com/SQL/ServiceBroker/BrokerConfigurationNotice/MissingRoute', 'X')
) AS t (name, validation);

INSERT INTO service_contracts
SELECT d.database_id, c.name, TRUE, CAST(timezone('UTC', current_timestamp) AS TIMESTAMP)
FROM databases AS d
CROSS JOIN (VALUES
    ('DEFAULT'),
    ('http://schemas.microsoft.com/SQL/ServiceBroker/BrokerConfigurationNotice')
) AS c (name);

INSERT INTO service_contract_message_usages
SELECT d.database_id, u.contract_name, u.message_type_name, u.by_initiator, u.by_target
FROM databases AS d
CROSS JOIN (VALUES
    ('DEFAULT', 'DEFAULT', TRUE, TRUE),
    ('http://schemas.microsoft.com/SQL/ServiceBroker/BrokerConfigurationNotice',
     'http://schemas.microsoft.com/SQL/ServiceBroker/BrokerConfigurationNotice/MissingRoute',
     TRUE, FALSE)
) AS u (contract_name, message_type_name, by_initiator, by_target);
