-- 021: the conversation group locks (C7) that the transactions of a process hold, and the
-- transactions that wait for one, written with the other views of what a process holds
-- (pybroker/kernel/live_views.py) right before a query reads them, emptied when the
-- instance opens for writing and when it closes. transaction_id -1 with no group is the
-- store's one write transaction (the WRITER of pybroker/core/conversation/group_locks.py).
CREATE TABLE broker_conversation_group_locks (
    database_id            INTEGER   NOT NULL,
    conversation_group_id  VARCHAR   NOT NULL,
    transaction_id         BIGINT    NOT NULL,
    thread_name            VARCHAR,
    since                  TIMESTAMP NOT NULL,
    waiting_transactions   INTEGER   NOT NULL,
    PRIMARY KEY (database_id, conversation_group_id)
);
CREATE TABLE broker_lock_waits (
    transaction_id            BIGINT    PRIMARY KEY,
    thread_name               VARCHAR,
    database_id               INTEGER   NOT NULL,
    conversation_group_id     VARCHAR   NOT NULL,
    blocking_transaction_id   BIGINT    NOT NULL,
    wait_started              TIMESTAMP NOT NULL,
    is_committing             BOOLEAN   NOT NULL
);
