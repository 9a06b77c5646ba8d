-- END CONVERSATION WITH CLEANUP: the endpoint row goes; the far side is not told.
DELETE FROM conversation_endpoints WHERE conversation_handle = $conversation_handle
