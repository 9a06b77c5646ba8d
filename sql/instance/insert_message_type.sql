INSERT INTO message_types (database_id, name, validation, is_system, create_date)
VALUES ($database_id, $name, $validation, FALSE, $now)
