-- sys.dm_broker_waits: one row per transaction of the process that waits for a lock (C7):
-- wait_type BROKER_GROUP_LOCK for a conversation group another transaction holds,
-- BROKER_WRITE_TRANSACTION for the store's one write transaction; who blocks it, since
-- when, and whether it waits to commit. As they are when read
-- (pybroker/kernel/live_views.py).
CREATE OR REPLACE VIEW sys.dm_broker_waits AS
SELECT w.transaction_id, w.thread_name,
    CASE WHEN w.database_id = -1 THEN 'BROKER_WRITE_TRANSACTION'
        ELSE 'BROKER_GROUP_LOCK' END AS wait_type,
    CASE WHEN w.database_id = -1 THEN NULL ELSE w.database_id END AS database_id,
    CASE WHEN w.database_id = -1 THEN NULL ELSE w.conversation_group_id END
        AS conversation_group_id,
    w.blocking_transaction_id, w.wait_started, w.is_committing
FROM main.broker_lock_waits AS w
