SELECT p.schema_name, p.name, p.definition, p.create_date, p.modify_date FROM procedures AS p
WHERE p.database_id = $database_id ORDER BY p.name_key
