-- RECEIVE (C3): the first ready conversation group of the queue, up to $max_messages of its
-- ready messages in queuing order, taken out in one statement. They leave for good when the
-- transaction commits; a rollback puts them back. A row with body_fragments has its body
-- in message_fragments (migrations/010): pybroker/kernel/messaging/message_parts.py reads it.
DELETE FROM queue_messages
WHERE queuing_order IN (
    {% include 'conversation/_first_ready_group.sql' %}
)
RETURNING queuing_order, conversation_handle, conversation_group_id, message_sequence_number,
    message_type_name, message_body, service_name, service_contract_name,
    body_fragments
