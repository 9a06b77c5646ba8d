-- One transaction waiting for a lock (migrations/021; pybroker/kernel/live_views.py).
INSERT INTO broker_lock_waits (transaction_id, thread_name, database_id,
    conversation_group_id, blocking_transaction_id, wait_started, is_committing)
VALUES ($transaction_id, $thread_name, $database_id, $conversation_group_id,
    $blocking_transaction_id, $wait_started, $is_committing)
