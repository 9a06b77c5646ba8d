-- sys.sql_modules: the text of each stored procedure, from CREATE to the end of its batch.
CREATE OR REPLACE VIEW sys.sql_modules AS
SELECT d.name AS database_name, p.object_id, p.definition
FROM main.procedures AS p
JOIN main.databases AS d ON d.database_id = p.database_id
