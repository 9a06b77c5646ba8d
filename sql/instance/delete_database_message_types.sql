-- DROP DATABASE, after its own objects were dropped: the system message types (C2).
DELETE FROM message_types WHERE database_id = $database_id
