-- One message into a queue (the single SEND of a transaction): plain bound values, cheaper
-- for one row than insert_queue_messages.sql's encoded columns. $body_fragments: NULL, or
-- the number of fragments in message_fragments that make the body (migrations/010).
INSERT INTO queue_messages (database_id, queue_name, queuing_order, status, priority,
    conversation_group_id, conversation_handle, message_sequence_number, service_name,
    service_contract_name, message_type_name, validation, message_body, message_enqueue_time,
    body_fragments)
VALUES ($database_id, $queue_name, $queuing_order, $status, $priority, $conversation_group_id,
    $conversation_handle, $message_sequence_number, $service_name, $service_contract_name,
    $message_type_name, $validation, $message_body, $message_enqueue_time, $body_fragments)
