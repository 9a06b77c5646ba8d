-- MOVE CONVERSATION: the conversation's messages in its queue (ready or retained) go with
-- it into the new conversation group, in their queuing order.
UPDATE queue_messages SET conversation_group_id = $conversation_group_id
WHERE conversation_handle = $conversation_handle
