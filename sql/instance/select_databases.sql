SELECT d.database_id, d.name, d.service_broker_guid FROM databases AS d ORDER BY d.database_id
