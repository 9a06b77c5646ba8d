-- 022: the options ALTER DATABASE ... SET TRUSTWORTHY and HONOR_BROKER_PRIORITY give a
-- database (sys.databases shows them, as SQL Server's does). NULL stands for OFF, as in a
-- new SQL Server database: the columns have no default, which DuckDB would fill into the
-- rows and then refuse to commit the second ADD COLUMN on.
ALTER TABLE databases ADD COLUMN is_trustworthy_on BOOLEAN;
ALTER TABLE databases ADD COLUMN is_honor_broker_priority_on BOOLEAN;

-- The broker priorities of each database (CREATE/ALTER/DROP BROKER PRIORITY, shown in
-- sys.conversation_priorities). A NULL contract or service name matches any (ANY); a
-- priority's name is unique in its database without regard to case (name_key: lower case).
CREATE TABLE conversation_priorities (
    database_id            INTEGER  NOT NULL,
    priority_id            INTEGER  NOT NULL,
    name                   VARCHAR  NOT NULL,
    name_key               VARCHAR  NOT NULL,
    service_contract_name  VARCHAR,
    local_service_name     VARCHAR,
    remote_service_name    VARCHAR,
    priority               TINYINT  NOT NULL,
    PRIMARY KEY (database_id, name_key)
);
