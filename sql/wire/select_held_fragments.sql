-- P4.4: the fragments of messages being reassembled (read at open).
SELECT f.conversation_handle, f.message_sequence_number, f.fragment_number
FROM message_fragments AS f
