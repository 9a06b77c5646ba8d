-- P4.4: the fragments of messages being reassembled, with their sizes (read at open); not
-- those of messages kept as their fragments, all of which arrived
-- (queue_messages.body_fragments).
SELECT f.conversation_handle, f.message_sequence_number, f.fragment_number,
    octet_length(f.message_body)
FROM message_fragments AS f
QUALIFY count(*) OVER (
    PARTITION BY f.conversation_handle, f.message_sequence_number) < f.fragment_count
