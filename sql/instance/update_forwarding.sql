UPDATE instance_settings SET is_forwarding_enabled = $enabled
