-- ALTER USER ... WITH NAME = new: the remote service bindings of the database that name it.
UPDATE remote_service_bindings SET user_name = $name
WHERE database_id = $database_id AND lower(user_name) = $name_key
