-- ALTER USER ... WITH NAME = new (on master): the peers' certificates it owns
-- (AUTHORIZATION) name it.
UPDATE trusted_certificates SET principal_name = $name WHERE lower(principal_name) = $name_key
