-- sys.procedures: the stored procedures of every database (CREATE PROCEDURE of a T-SQL
-- batch), with SQL Server's type P, SQL_STORED_PROCEDURE.
CREATE OR REPLACE VIEW sys.procedures AS
SELECT d.name AS database_name, p.name, p.object_id, p.schema_name,
    'P' AS type, 'SQL_STORED_PROCEDURE' AS type_desc, p.create_date, p.modify_date
FROM main.procedures AS p
JOIN main.databases AS d ON d.database_id = p.database_id
