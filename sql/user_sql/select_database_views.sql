-- The sys views that hold a row per database (a database_name column): inside a T-SQL
-- batch each is read as the view of the batch's database only (core/tsql/ordinary_sql.py).
SELECT c.table_name FROM information_schema.columns AS c
WHERE c.table_schema = 'sys' AND c.column_name = 'database_name'
