-- END CONVERSATION: the fragments the endpoint holds leave with its messages, those of
-- messages still being reassembled and those of messages kept as their fragments.
DELETE FROM message_fragments WHERE conversation_handle = $conversation_handle
