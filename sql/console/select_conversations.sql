-- the console's conversations: the endpoints of the conversation searched for (by the
-- handle of one of its endpoints, or by its conversation id), or the most recent 500
SELECT database_name, conversation_handle, conversation_id, is_initiator, service_name,
    far_service, service_contract_name, state_desc, send_sequence,
    first_unacked_send_sequence, receive_sequence, create_date
FROM sys.conversation_endpoints
WHERE $handle IS NULL
    OR lower(conversation_id) = lower($handle)
    OR conversation_id IN (
        SELECT e.conversation_id FROM sys.conversation_endpoints AS e
        WHERE lower(e.conversation_handle) = lower($handle))
ORDER BY CASE WHEN $handle IS NULL THEN create_date END DESC, is_initiator DESC, create_date DESC,
    conversation_handle
LIMIT 500
