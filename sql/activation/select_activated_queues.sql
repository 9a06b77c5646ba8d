-- The queues the queue monitors watch: ACTIVATION ON with a procedure, and the queue ON
-- (a queue turned OFF, by ALTER QUEUE or by poison-message handling, starts no reader, C3).
SELECT q.database_id, q.name, q.activation_procedure, q.max_readers,
    q.activation_execute_as
FROM service_queues AS q
WHERE q.is_activation_enabled AND q.activation_procedure IS NOT NULL
    AND q.is_receive_enabled
ORDER BY q.database_id, q.name
