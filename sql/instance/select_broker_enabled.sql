-- Whether a database's broker is enabled (ALTER DATABASE ... SET ENABLE_BROKER | DISABLE_BROKER).
SELECT d.is_broker_enabled FROM databases AS d WHERE d.database_id = $database_id
