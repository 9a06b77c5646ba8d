-- RECEIVE from a queue with RETENTION ON: as receive_messages.sql, but the messages stay,
-- marked retained (status 0), until their conversation ends.
UPDATE queue_messages SET status = 0
WHERE queuing_order IN (
    {% include 'conversation/_first_ready_group.sql' %}
)
RETURNING queuing_order, conversation_handle, conversation_group_id, message_sequence_number,
    message_type_name, message_body, service_name, service_contract_name,
    body_fragments
