INSERT INTO service_contracts (database_id, name, is_system, create_date)
VALUES ($database_id, $name, FALSE, $now)
