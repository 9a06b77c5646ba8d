-- 020: stored procedures (CREATE/ALTER/DROP PROCEDURE of a T-SQL batch), per database, with
-- the text they were created with (sys.procedures, sys.sql_modules). A procedure's name is
-- unique in its schema without regard to case, as under SQL Server's default collation:
-- name_key is its lower-case schema.name.
CREATE TABLE procedures (
    database_id   INTEGER   NOT NULL,
    object_id     INTEGER   NOT NULL,
    schema_name   VARCHAR   NOT NULL,
    name          VARCHAR   NOT NULL,
    name_key      VARCHAR   NOT NULL,
    definition    VARCHAR   NOT NULL,
    create_date   TIMESTAMP NOT NULL,
    modify_date   TIMESTAMP NOT NULL,
    PRIMARY KEY (database_id, name_key)
);
