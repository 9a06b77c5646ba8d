-- sys.transmission_queue: messages that have not left their sending database yet, with
-- why (C4: transmission_status is '' while nothing went wrong).
CREATE OR REPLACE VIEW sys.transmission_queue AS
SELECT d.name AS database_name, t.conversation_handle, t.to_service_name,
    t.to_broker_instance, t.from_service_name, t.service_contract_name, t.enqueue_time,
    t.message_sequence_number, t.message_type_name, t.is_conversation_error,
    t.is_end_of_dialog, t.message_body, t.transmission_status, t.priority,
    t.fragment_number, t.fragment_count, t.message_size, t.is_inbound
FROM main.transmission_queue AS t
JOIN main.databases AS d ON d.database_id = t.database_id
