-- P5.2: messages the far side acknowledged leave the transmission queue. Runs of
-- consecutive sequence numbers of one endpoint ($conversation_handle, $first_sequence,
-- $last_sequence), comma-joined, as columns.py encodes (columns.runs): an acknowledgement
-- covers a run of each conversation's messages, so a run a row, not a message a row.
DELETE FROM transmission_queue AS t
USING {% include 'conversation/_message_runs.sql' %} AS a
WHERE NOT t.is_inbound AND t.conversation_handle = a.conversation_handle
    AND t.message_sequence_number BETWEEN a.first_sequence AND a.last_sequence
