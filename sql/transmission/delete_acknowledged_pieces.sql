-- P5.2: the pieces of the messages the far side acknowledged leave with their rows
-- (wire/delete_acknowledged.sql, the same runs, comma-joined as columns.py encodes).
DELETE FROM transmission_queue_pieces AS p
USING {% include 'conversation/_message_runs.sql' %} AS a
WHERE p.conversation_handle = a.conversation_handle
    AND p.message_sequence_number BETWEEN a.first_sequence AND a.last_sequence
