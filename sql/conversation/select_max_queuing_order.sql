SELECT COALESCE(MAX(m.queuing_order), 0) FROM queue_messages AS m
