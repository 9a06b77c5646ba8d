INSERT INTO procedures (database_id, object_id, schema_name, name, name_key, definition,
                        create_date, modify_date)
SELECT $database_id, COALESCE((SELECT MAX(p.object_id) FROM procedures AS p), 0) + 1,
    $schema_name, $name, $name_key, $definition, $now, $now
