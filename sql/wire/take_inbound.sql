-- P8: arrivals that waited for their queue to be turned ON leave the transmission queue.
DELETE FROM transmission_queue
WHERE is_inbound
RETURNING database_id, conversation_handle, message_sequence_number, message_type_name,
    validation, message_body, enqueue_time
