UPDATE instance_settings SET forwarding_size_mb = $size_mb
