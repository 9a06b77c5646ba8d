-- END CONVERSATION: the endpoint's messages leave its queue (received or not).
DELETE FROM queue_messages WHERE conversation_handle = $conversation_handle
