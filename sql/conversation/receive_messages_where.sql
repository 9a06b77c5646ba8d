-- RECEIVE ... WHERE conversation_handle = ... | conversation_group_id = ... (C3): as
-- receive_messages.sql, for the messages of one conversation or one group only.
DELETE FROM queue_messages
WHERE queuing_order IN (
    {% include 'conversation/_first_ready_group_where.sql' %}
)
RETURNING queuing_order, conversation_handle, conversation_group_id, message_sequence_number,
    message_type_name, message_body, service_name, service_contract_name,
    body_fragments
