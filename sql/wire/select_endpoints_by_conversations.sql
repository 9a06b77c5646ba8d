-- The endpoints of many conversation sides at once, for a batch of arrivals from the
-- network: pairs of ($conversation_id, $is_initiator), comma-joined as
-- pybroker/core/conversation/columns.py encodes them (GUIDs; flags 1/0).
SELECT e.conversation_id, e.is_initiator, e.conversation_handle, e.database_id
FROM conversation_endpoints AS e
JOIN (
    SELECT
        UNNEST(string_split($conversation_id, ',')) AS conversation_id,
        UNNEST(string_split($is_initiator, ',')) = '1' AS is_initiator
) AS k ON k.conversation_id = e.conversation_id AND k.is_initiator = e.is_initiator
ORDER BY e.create_date
