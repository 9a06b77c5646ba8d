-- 022: the options ALTER DATABASE ... SET TRUSTWORTHY and HONOR_BROKER_PRIORITY give a
-- database (sys.databases shows them, as SQL Server's does); off, as in a new SQL Server
-- database.
ALTER TABLE databases ADD COLUMN is_trustworthy_on BOOLEAN DEFAULT FALSE;
ALTER TABLE databases ADD COLUMN is_honor_broker_priority_on BOOLEAN DEFAULT FALSE;
