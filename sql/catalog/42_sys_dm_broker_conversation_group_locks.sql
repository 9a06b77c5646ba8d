-- sys.dm_broker_conversation_group_locks: one row per conversation group a transaction of
-- the process holds (C7: from the verb that locked it to its commit or rollback), with
-- the queue of its conversations, the holder's transaction and thread, since when, and how
-- many transactions wait for it. The store's write transaction is the row with
-- database_id -1. As they are when read (pybroker/kernel/live_views.py).
CREATE OR REPLACE VIEW sys.dm_broker_conversation_group_locks AS
SELECT l.database_id, d.name AS database_name,
    (SELECT MIN(s.queue_name) FROM main.conversation_endpoints AS e
     JOIN main.services AS s ON s.database_id = e.database_id AND s.name = e.service_name
     WHERE e.database_id = l.database_id
         AND e.conversation_group_id = l.conversation_group_id) AS queue_name,
    CASE WHEN l.database_id = -1 THEN NULL ELSE l.conversation_group_id END
        AS conversation_group_id,
    l.transaction_id AS holder, l.thread_name, l.since, l.waiting_transactions
FROM main.broker_conversation_group_locks AS l
LEFT JOIN main.databases AS d ON d.database_id = l.database_id
