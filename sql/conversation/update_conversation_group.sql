-- MOVE CONVERSATION: this side of the conversation joins another conversation group.
UPDATE conversation_endpoints SET conversation_group_id = $conversation_group_id
WHERE conversation_handle = $conversation_handle
