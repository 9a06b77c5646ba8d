-- sys.databases: the databases of this instance (master and msdb always among them).
CREATE OR REPLACE VIEW sys.databases AS
SELECT d.name, d.database_id, d.service_broker_guid, d.is_broker_enabled, d.create_date,
    COALESCE(d.is_trustworthy_on, FALSE) AS is_trustworthy_on,
    COALESCE(d.is_honor_broker_priority_on, FALSE) AS is_honor_broker_priority_on
FROM main.databases AS d
