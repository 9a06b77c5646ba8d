-- P4.4: the fragments of messages being reassembled, with their sizes (read at open); not
-- those of messages kept as their fragments, all of which arrived
-- (queue_messages.body_fragments). A fragment is kept as pieces (migrations/010).
SELECT f.conversation_handle, f.message_sequence_number, f.fragment_number,
    sum(octet_length(f.message_body))
FROM message_fragments AS f
GROUP BY f.conversation_handle, f.message_sequence_number, f.fragment_number
QUALIFY count(*) OVER (
    PARTITION BY f.conversation_handle, f.message_sequence_number)
    < any_value(f.fragment_count)
