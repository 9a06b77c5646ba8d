-- 004: the name T-SQL gives this instance's own endpoint certificate (CREATE CERTIFICATE
-- name WITH SUBJECT = '...' on master), so that CREATE ENDPOINT ... AUTHENTICATION =
-- CERTIFICATE name can name it, as in SQL Server. NULL until a CREATE CERTIFICATE names it.
ALTER TABLE instance_settings ADD COLUMN endpoint_certificate_name VARCHAR;
