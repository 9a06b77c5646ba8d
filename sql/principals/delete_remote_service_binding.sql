-- DROP REMOTE SERVICE BINDING.
DELETE FROM remote_service_bindings WHERE database_id = $database_id AND name_key = $name_key
RETURNING name
