-- CREATE/ALTER QUEUE ... WITH ACTIVATION (...): the queue's activation settings as a whole
-- (ACTIVATION (DROP) clears them: no procedure, 0 readers, no EXECUTE AS).
UPDATE service_queues
SET is_activation_enabled = $is_activation_enabled,
    activation_procedure = $activation_procedure,
    max_readers = $max_readers,
    activation_execute_as = $activation_execute_as
WHERE database_id = $database_id AND name = $name
