-- P5.2: messages the far side acknowledged leave the transmission queue. Pairs of
-- ($conversation_handle, $message_sequence_number), comma-joined, as columns.py encodes.
DELETE FROM transmission_queue AS t
USING {% include 'conversation/_message_pairs.sql' %} AS a
WHERE NOT t.is_inbound AND t.conversation_handle = a.conversation_handle
    AND t.message_sequence_number = a.message_sequence_number
