SELECT p.schema_name, p.name, p.definition FROM procedures AS p
WHERE p.database_id = $database_id AND p.name_key = $name_key
