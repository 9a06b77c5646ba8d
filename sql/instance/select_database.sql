SELECT d.database_id, d.name, d.service_broker_guid FROM databases AS d WHERE d.name = $name
