-- sys.remote_service_bindings: CREATE REMOTE SERVICE BINDING, per database; the user is
-- named (SQL Server's remote_principal_id).
CREATE OR REPLACE VIEW sys.remote_service_bindings AS
SELECT d.name AS database_name, b.name, b.remote_service_name, b.user_name,
    b.is_anonymous_on, b.create_date
FROM main.remote_service_bindings AS b
JOIN main.databases AS d ON d.database_id = b.database_id
