SELECT
  BOOL_OR(f.is_forwarding_enabled) AS is_forwarding_enabled
FROM instance_settings AS f
