UPDATE instance_settings SET max_message_size = $size
