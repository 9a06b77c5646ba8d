-- ALTER LOGIN ... WITH NAME = new: the users of every database for the login name it.
UPDATE database_principals SET login_name = $name WHERE lower(login_name) = $name_key
