SELECT i.is_forwarding_enabled, i.forwarding_size_mb FROM instance_settings AS i
