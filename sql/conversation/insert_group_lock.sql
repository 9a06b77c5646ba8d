-- One conversation group a transaction holds (migrations/021; pybroker/kernel/live_views.py).
INSERT INTO broker_conversation_group_locks (database_id, conversation_group_id,
    transaction_id, thread_name, since, waiting_transactions)
VALUES ($database_id, $conversation_group_id, $transaction_id, $thread_name, $since,
    $waiting_transactions)
