-- RECEIVE (C3): the first ready conversation group of the queue, up to $max_messages of its
-- ready messages in queuing order, taken out in one statement. They leave for good when the
-- transaction commits; a rollback puts them back.
DELETE FROM queue_messages
WHERE queuing_order IN (
    {% include 'conversation/_first_ready_group.sql' %}
)
RETURNING queuing_order, conversation_handle, conversation_group_id, message_sequence_number,
    message_type_name, message_body, service_name, service_contract_name
