-- The queues of a database: the names SELECT ... FROM <queue> reads in a T-SQL batch.
SELECT q.name FROM service_queues AS q WHERE q.database_id = $database_id
