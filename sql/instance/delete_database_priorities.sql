-- DROP DATABASE: its broker priorities.
DELETE FROM conversation_priorities WHERE database_id = $database_id
