-- DROP BROKER PRIORITY.
DELETE FROM conversation_priorities WHERE database_id = $database_id AND name_key = $name_key
