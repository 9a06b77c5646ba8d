-- ALTER USER ... WITH NAME = new: the user keeps its id, login and certificate.
UPDATE database_principals SET name = $name, name_key = $new_key
WHERE database_id = $database_id AND name_key = $name_key
