-- DROP ENDPOINT: the permissions on the endpoint go with it, as in SQL Server.
DELETE FROM broker_permissions WHERE database_id = 1 AND class_desc = 'ENDPOINT'
