-- DROP DATABASE, after its objects were dropped: the database itself.
DELETE FROM databases WHERE database_id = $database_id
