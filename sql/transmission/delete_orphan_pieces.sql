-- At open: pieces no row of the transmission queue names are what a SEND wrote before its
-- transaction rolled back or the process stopped (migrations/011); they go.
DELETE FROM transmission_queue_pieces AS p
WHERE NOT EXISTS (
    SELECT 1 FROM transmission_queue AS t
    WHERE NOT t.is_inbound AND t.body_pieces IS NOT NULL
        AND t.conversation_handle = p.conversation_handle
        AND t.message_sequence_number = p.message_sequence_number
)
