{#-
  The forwarding setting as the live engine's mirror keeps it (pybroker/core/routing/mirror.py;
  R3.6): the same value as the 'forwarding' row of select_key_inputs.sql.
-#}
SELECT BOOL_OR(f.is_forwarding_enabled) AS is_forwarding_enabled
FROM instance_settings AS f
