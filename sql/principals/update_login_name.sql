-- ALTER LOGIN ... WITH NAME = new: the login keeps its id, certificate and users.
UPDATE server_principals SET name = $name, name_key = $new_key WHERE name_key = $name_key
