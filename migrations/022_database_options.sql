-- 022: the options ALTER DATABASE ... SET TRUSTWORTHY and HONOR_BROKER_PRIORITY give a
-- database (sys.databases shows them, as SQL Server's does). NULL stands for OFF, as in a
-- new SQL Server database: the columns have no default, which DuckDB would fill into the
-- rows and then refuse to commit the second ADD COLUMN on.
ALTER TABLE databases ADD COLUMN is_trustworthy_on BOOLEAN;
ALTER TABLE databases ADD COLUMN is_honor_broker_priority_on BOOLEAN;
