-- P4.4: whole messages that arrived ahead of a missing one (status 2), read at open.
SELECT m.conversation_handle, m.message_sequence_number, m.message_type_name,
    m.message_type_name = 'http://schemas.microsoft.com/SQL/ServiceBroker/EndDialog',
    m.message_type_name = 'http://schemas.microsoft.com/SQL/ServiceBroker/Error'
FROM queue_messages AS m
WHERE m.status = 2
