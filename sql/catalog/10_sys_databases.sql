-- sys.databases: the databases of this instance (master and msdb always among them).
CREATE OR REPLACE VIEW sys.databases AS
SELECT d.name, d.database_id, d.service_broker_guid, d.is_broker_enabled, d.create_date
FROM main.databases AS d
