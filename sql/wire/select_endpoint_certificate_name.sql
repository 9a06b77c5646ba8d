-- The name T-SQL gave this instance's own endpoint certificate (NULL: none yet).
SELECT s.endpoint_certificate_name FROM instance_settings AS s
