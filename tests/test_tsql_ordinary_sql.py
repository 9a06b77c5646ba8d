"""The SQL around the verbs in a T-SQL batch (issue 46 item 4): SELECT, INSERT, UPDATE,
DELETE, CREATE TABLE and DROP TABLE translated by sqlglot's T-SQL dialect and run on DuckDB
(pybroker.core.tsql.ordinary_sql, pybroker.kernel.user_sql), user tables in their database's
own schema, variables bound as parameters, SELECT @v = ..., @@ROWCOUNT, the sys views of
the batch's database, SELECT ... FROM <queue>, IF [NOT] EXISTS (subquery) and OBJECT_ID;
each refusal with its line and column, and a refused batch that changes nothing."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pybroker
from pybroker import TsqlSyntaxError
from pybroker.errors import InvalidArgumentError


@pytest.fixture(scope="module")
def inst():
    instance = pybroker.connect(None, worker=False)
    database = instance.create_database("Shop")
    database.execute("CREATE QUEUE OrderQueue; CREATE SERVICE Orders ON QUEUE OrderQueue "
                     "([DEFAULT]); CREATE QUEUE ReplyQueue; "
                     "CREATE SERVICE Replies ON QUEUE ReplyQueue")
    instance.create_database("Depot")
    yield instance
    instance.close()


@pytest.fixture()
def db(inst):
    return inst.database("Shop")


def test_user_tables_live_in_their_database_s_schema_beside_the_sys_views(inst, db):
    results = db.execute("""
        CREATE TABLE dbo.ProcessedLog (id INT IDENTITY(1,1) PRIMARY KEY,
            body NVARCHAR(MAX), amount DECIMAL(10, 2), at DATETIME DEFAULT GETDATE());
        DECLARE @body NVARCHAR(100) = N'first', @amount INT = 5;
        INSERT INTO ProcessedLog (body, amount) VALUES (@body, @amount), (N'second', 7);
        PRINT @@ROWCOUNT;
        SELECT id, body, amount FROM dbo.ProcessedLog ORDER BY id;
        DROP TABLE IF EXISTS NotThere;
    """)
    assert results.messages == ["2"]
    [rows] = results
    assert rows.columns == ("id", "body", "amount")
    assert rows.rows == [(1, "first", 5), (2, "second", 7)]
    # an analyst reads it where the database's name says, beside sys.services
    assert inst.sql('SELECT body FROM Shop_dbo.ProcessedLog ORDER BY id').fetchall() == [
        ("first",), ("second",)]
    # another database's table of the same name is its own
    depot = inst.database("Depot")
    depot.execute("CREATE TABLE ProcessedLog (body VARCHAR(10)); "
                  "INSERT INTO ProcessedLog VALUES ('depot')")
    assert depot.execute("SELECT * FROM ProcessedLog")[0].rows == [("depot",)]
    assert db.execute("SELECT count(*) AS n FROM Depot.dbo.ProcessedLog")[0].rows == [(1,)]
    db.execute("DROP TABLE ProcessedLog")
    assert inst.sql("SELECT count(*) FROM duckdb_tables() WHERE schema_name = 'Shop_dbo'"
                    ).fetchone() == (0,)


def test_select_assigns_the_last_row_and_rowcount_follows_each_statement(db):
    results = db.execute("""
        CREATE TABLE Stock (item VARCHAR(20), qty INT);
        INSERT INTO Stock VALUES ('bolt', 3), ('nut', 9), ('gear', 1);
        DECLARE @item VARCHAR(20) = 'none', @qty INT = -1;
        SELECT @item = item, @qty = qty FROM Stock ORDER BY qty;
        PRINT @item + ' ' + CAST(@qty AS VARCHAR(5)) + ' ' + CAST(@@ROWCOUNT AS VARCHAR(5));
        SELECT @item = item FROM Stock WHERE qty > 100;
        PRINT @item + ' ' + CAST(@@ROWCOUNT AS VARCHAR(5));
        UPDATE Stock SET qty = qty + 1 WHERE qty < @qty;
        PRINT @@ROWCOUNT;
        DELETE FROM Stock WHERE item IN ('bolt', 'gear');
        PRINT @@ROWCOUNT;
        SELECT item, qty FROM Stock;
        DROP TABLE Stock;
    """)
    # SQL Server assigns each row in turn: the last one's values stay; no row, no change
    assert results.messages == ["nut 9 3", "nut 0", "2", "2"]
    assert results[0].rows == [("nut", 9)]


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(alphabet=st.characters(blacklist_categories=["Cs"],
                                           blacklist_characters="\x00"), max_size=30))
def test_variables_are_bound_as_parameters_never_spliced(db, text):
    db.execute("DROP TABLE IF EXISTS Notes; CREATE TABLE Notes (note NVARCHAR(MAX))")
    # the value goes in as a parameter: quotes, semicolons and "DROP TABLE" are only text
    db.execute("DECLARE @note NVARCHAR(MAX) = @@text; INSERT INTO Notes VALUES (@note)"
               .replace("@@text", "N'" + text.replace("'", "''") + "'"))
    [found] = db.execute("DECLARE @n NVARCHAR(MAX); SELECT @n = note FROM Notes; "
                         "SELECT note FROM Notes WHERE note = @n")
    assert found.rows == [(text,)]


def test_rollback_undoes_a_user_table_s_rows_with_the_rest(db):
    db.execute("CREATE TABLE Audit (what VARCHAR(20))")
    db.execute("BEGIN TRANSACTION; INSERT INTO Audit VALUES ('undone'); ROLLBACK")
    db.execute("BEGIN TRANSACTION; INSERT INTO Audit VALUES ('kept'); COMMIT")
    assert db.execute("SELECT what FROM Audit")[0].rows == [("kept",)]
    db.execute("DROP TABLE Audit")


def test_sys_views_in_a_batch_show_the_batch_s_database(inst, db):
    results = db.execute("""
        IF EXISTS (SELECT * FROM sys.services WHERE name = 'Orders') PRINT 'has Orders';
        IF NOT EXISTS (SELECT * FROM sys.services WHERE name = N'Nothing') PRINT 'no Nothing';
        IF EXISTS (SELECT 1 FROM sys.service_queues AS q WHERE q.name = 'OrderQueue')
            PRINT 'has OrderQueue';
        SELECT name FROM sys.services ORDER BY name;
        SELECT count(*) AS routes FROM sys.routes;
    """)
    assert results.messages == ["has Orders", "no Nothing", "has OrderQueue"]
    assert results[0].rows == [("Orders",), ("Replies",)]
    assert results[1].rows == [(1,)]  # AutoCreatedLocal, of Shop only (R1.3)
    depot = inst.database("Depot").execute("SELECT count(*) AS n FROM sys.services")
    assert depot[0].rows == [(0,)]


def test_select_from_a_queue_and_the_conversation_views(db):
    results = db.execute("""
        DECLARE @h UNIQUEIDENTIFIER;
        BEGIN DIALOG @h FROM SERVICE Replies TO SERVICE 'Orders' WITH ENCRYPTION = OFF;
        SEND ON CONVERSATION @h (N'<order id="1"/>');
        SELECT message_type_name, service_name, validation, service_id
            FROM OrderQueue WHERE conversation_handle IS NOT NULL;
        SELECT state_desc FROM sys.conversation_endpoints WHERE conversation_handle = @h;
        SELECT count(*) AS waiting FROM sys.transmission_queue;
        END CONVERSATION @h WITH CLEANUP;
    """)
    assert results[0].columns == ("message_type_name", "service_name", "validation",
                                  "service_id")
    assert results[0].rows == [("DEFAULT", "Orders", "N", None)]
    assert results[1].rows == [("CONVERSING",)]
    assert results[2].rows == [(0,)]
    db.execute("DECLARE @h UNIQUEIDENTIFIER; RECEIVE @h = conversation_handle FROM OrderQueue; "
               "END CONVERSATION @h WITH CLEANUP")
    with pytest.raises(TsqlSyntaxError, match="OrderQueue is a queue: SELECT reads it"):
        db.execute("DELETE FROM OrderQueue")


def test_object_id_guards_procedures_tables_and_queues(db):
    results = db.execute("""
        IF OBJECT_ID('dbo.Tally') IS NOT NULL DROP PROCEDURE dbo.Tally;
        IF OBJECT_ID('Counts', 'U') IS NULL CREATE TABLE Counts (n INT);
    """)
    db.execute("CREATE PROCEDURE dbo.Tally AS INSERT INTO Counts VALUES (1)")
    results = db.execute("""
        IF OBJECT_ID('dbo.Tally') IS NOT NULL DROP PROCEDURE dbo.Tally;
        IF OBJECT_ID('dbo.Tally', 'P') IS NULL PRINT 'dropped';
        IF OBJECT_ID('[dbo].[Counts]') IS NOT NULL PRINT 'table';
        IF OBJECT_ID('Shop.dbo.OrderQueue', 'SQ') IS NOT NULL PRINT 'queue';
        IF OBJECT_ID('OrderQueue', 'U') IS NULL PRINT 'not a table';
        IF OBJECT_ID('Nowhere.dbo.Counts') IS NULL PRINT 'no database';
        IF OBJECT_ID(NULL) IS NULL PRINT 'null';
        DROP TABLE Counts;
    """)
    assert results.messages == ["dropped", "table", "queue", "not a table", "no database",
                                "null"]


def test_a_procedure_logs_with_its_parameters_in_the_caller_s_transaction(db):
    db.execute("CREATE TABLE Processed (kind SYSNAME, n INT)")
    db.execute("CREATE PROCEDURE dbo.LogOne @kind SYSNAME, @n INT = 1 AS\n"
               "INSERT INTO dbo.Processed (kind, n) VALUES (@kind, @n);\n"
               "RETURN @@ROWCOUNT")
    results = db.execute("""
        DECLARE @rc INT;
        BEGIN TRANSACTION;
        EXEC @rc = dbo.LogOne N'request', 2;
        EXEC dbo.LogOne @kind = N'undone';
        ROLLBACK;
        EXEC @rc = dbo.LogOne N'reply';
        PRINT @rc;
        SELECT kind, n FROM Processed;
        DROP PROCEDURE dbo.LogOne;
        DROP TABLE Processed;
    """)
    assert results.messages == ["1"]
    assert results[0].rows == [("reply", 1)]


@pytest.mark.parametrize(("text", "message"), [
    ("SELECT a\n  FROM t WHERE", "the SELECT statement at line 1, column 1 is not understood "
     "at line 2, column 10"),
    ("PRINT 1; SELECT dbo.tally(a) FROM t", "the statement at line 1, column 10 is not "
     "supported: the function tally() is not one sqlglot's T-SQL dialect knows"),
    ("SELECT * FROM #work", "the temporary table #work"),
    ("SELECT * FROM hr.people", "the schema hr of people: a database's tables are in its "
     "dbo schema"),
    ("SELECT a FROM t WHERE a = @missing", "the variable @missing in the statement at "
     "line 1, column 1 is not declared"),
    ("DECLARE @v INT; SELECT @v = a, b FROM t", "assigns to variables and returns columns"),
    ("SELECT a INTO copy FROM t", "SELECT ... INTO"),
    ("DELETE FROM sys.routes", "sys.routes is a catalog view: it is read-only"),
    ("IF EXISTS (SELECT a FROM t WHERE) PRINT 1", "the SELECT statement at line 1, column 12 "
     "is not understood"),
])
def test_bad_ordinary_sql_is_refused_with_its_line_and_column(db, text, message):
    with pytest.raises(TsqlSyntaxError) as caught:
        db.execute(text)
    assert message in str(caught.value)


def test_a_refused_batch_changes_nothing(inst, db):
    with pytest.raises(TsqlSyntaxError):
        db.execute("CREATE TABLE Half (a INT); INSERT INTO Half VALUES (1); "
                   "SELECT SOUNDEX_OF(a) FROM Half")
    assert inst.sql("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'Half'"
                    ).fetchone() == (0,)


def test_what_duckdb_refuses_at_run_time_stops_the_batch_with_its_reason(db):
    with pytest.raises(InvalidArgumentError) as caught:
        db.execute("PRINT 'before'; INSERT INTO NoSuchTable VALUES (1)")
    assert str(caught.value).startswith(
        "INSERT at line 1, column 17 failed: DuckDB refused it: Catalog Error: Table with "
        "name")
    assert caught.value.results.messages == ["before"]


# -- the XML of a body ------------------------------------------------------------------------

ORDER = ('<order id="7" priority="high"><item>bolt</item><item>nut</item><qty>3</qty>'
         '<note>caf\u00e9</note></order>')


def test_xml_methods_read_a_body_as_sql_server_s_do(db):
    results = db.execute(f"""
        DECLARE @body VARBINARY(MAX) = CAST(N'{ORDER}' AS VARBINARY(MAX));
        DECLARE @x XML = CAST(@body AS XML), @qty INT;
        SET @qty = @x.value('(/order/qty/text())[1]', 'int');
        PRINT @qty + 1;
        PRINT @x.value('(/order/item)[2]', 'nvarchar(20)');
        PRINT @x.value('(/order/@id)[1]', 'INT') + 1;
        PRINT @x.value('(//note)[1]', 'NVARCHAR(10)');
        IF @x.exist('/order[@priority="high"]') = 1 PRINT 'high';
        IF @x.exist('/order/missing') = 0 PRINT 'no missing';
        PRINT @x.query('/order/item');
        IF @x.value('(/order/missing)[1]', 'int') IS NULL PRINT 'empty is NULL';
        PRINT CAST(@body AS XML).value('(/order/item/text())[1]', 'varchar(10)');
    """)
    assert results.messages == ["4", "nut", "8", "caf\u00e9", "high", "no missing",
                                "<item>bolt</item><item>nut</item>", "empty is NULL", "bolt"]


def test_xml_methods_read_a_broker_error_in_its_namespace(db):
    results = db.execute("""
        DECLARE @x XML = N'<Error xmlns="http://schemas.microsoft.com/SQL/ServiceBroker/Error">
            <Code>-8489</Code><Description>lifetime expired</Description></Error>';
        PRINT @x.value('declare default element namespace
            "http://schemas.microsoft.com/SQL/ServiceBroker/Error"; (/Error/Code)[1]', 'int');
        PRINT @x.value('declare namespace e = "http://schemas.microsoft.com/SQL/ServiceBroker/Error";
            (/e:Error/e:Description)[1]', 'nvarchar(100)');
        PRINT @x.value('(/*:Error/*:Code)[1]', 'int') - 1;
        IF @x.exist('/Error') = 0 PRINT 'no Error outside its namespace';
    """)
    assert results.messages == ["-8489", "lifetime expired", "-8490",
                                "no Error outside its namespace"]


def test_a_received_body_read_with_cast_as_xml(db):
    results = db.execute("""
        DECLARE @h UNIQUEIDENTIFIER, @x XML, @body NVARCHAR(MAX);
        BEGIN DIALOG @h FROM SERVICE Replies TO SERVICE 'Orders' WITH ENCRYPTION = OFF;
        SEND ON CONVERSATION @h (N'<order><name>caf\u00e9</name></order>');
        SELECT TOP (1) @x = CAST(message_body AS XML), @body = CAST(message_body AS NVARCHAR(MAX))
            FROM OrderQueue ORDER BY queuing_order;
        PRINT @x.value('(/order/name/text())[1]', 'nvarchar(20)');
        PRINT @body;
        END CONVERSATION @h WITH CLEANUP;
    """)
    assert results.messages == ["caf\u00e9", "<order><name>caf\u00e9</name></order>"]
    db.execute("DECLARE @h UNIQUEIDENTIFIER; RECEIVE @h = conversation_handle FROM OrderQueue; "
               "END CONVERSATION @h WITH CLEANUP")


@pytest.mark.parametrize(("text", "message"), [
    ("DECLARE @x XML; PRINT @x.value('count(/a)', 'int')", "the XQuery path 'count(/a)' at "
     "line 1, column 32 is not supported: the function count() is not in the subset"),
    ("DECLARE @x XML; PRINT @x.value('a/b', 'int')", "expected an absolute path"),
    ("DECLARE @x XML; PRINT @x.exist('(/a/following-sibling::b)[1]')", "axes (name::)"),
    ("DECLARE @x XML; PRINT @x.value('(/p:a)[1]', 'int')", "the prefix p is not declared"),
    ("DECLARE @x XML; PRINT @x.value('/a', 'int x')", "expected only a SQL type in "
     "value()'s type 'int x' but found 'x' at line 1, column 38"),
    ("DECLARE @x XML; PRINT @x.value('/a')", "expected ',' and the SQL type after value()'s "
     "path"),
    ("DECLARE @p NVARCHAR(9) = '/a'; DECLARE @x XML; PRINT @x.exist(@p)",
     "expected the XQuery path of exist() as a string literal"),
    ("SELECT CAST(message_body AS XML).value('(/a)[1]', 'int') FROM OrderQueue",
     "the XML method .value() is not supported in a query: SELECT the column into an XML "
     "variable"),
])
def test_xml_beyond_the_subset_is_refused_with_its_place(db, text, message):
    with pytest.raises(TsqlSyntaxError) as caught:
        db.execute(text)
    assert message in str(caught.value)


def test_xml_that_is_not_well_formed_stops_the_batch(db):
    with pytest.raises(InvalidArgumentError, match="not well-formed XML"):
        db.execute("DECLARE @x NVARCHAR(20) = N'<a>'; PRINT CAST(@x AS XML).exist('/a')")


# -- a script in the shape of the tutorial "completing a conversation in a single database" --

# The tutorial's steps in order, with the guards such scripts carry before they create
# anything (IF EXISTS ... DROP, OBJECT_ID) and a log table of what the target processed.
SINGLE_DATABASE_TUTORIAL = """
-- start again from nothing: drop what an earlier run left
IF EXISTS (SELECT * FROM sys.services WHERE name = N'//Counter/Shelf/TargetService')
    DROP SERVICE [//Counter/Shelf/TargetService];
IF EXISTS (SELECT * FROM sys.services WHERE name = N'//Counter/Shelf/InitiatorService')
    DROP SERVICE [//Counter/Shelf/InitiatorService];
IF OBJECT_ID(N'dbo.ShelfTargetQueue') IS NOT NULL DROP QUEUE ShelfTargetQueue;
IF OBJECT_ID(N'dbo.ShelfInitiatorQueue') IS NOT NULL DROP QUEUE ShelfInitiatorQueue;
IF EXISTS (SELECT * FROM sys.service_contracts WHERE name = N'//Counter/Shelf/Contract')
    DROP CONTRACT [//Counter/Shelf/Contract];
IF EXISTS (SELECT * FROM sys.service_message_types WHERE name = N'//Counter/Shelf/Ask')
    DROP MESSAGE TYPE [//Counter/Shelf/Ask];
IF EXISTS (SELECT * FROM sys.service_message_types WHERE name = N'//Counter/Shelf/Answer')
    DROP MESSAGE TYPE [//Counter/Shelf/Answer];
IF OBJECT_ID(N'dbo.ShelfLog', N'U') IS NOT NULL DROP TABLE dbo.ShelfLog;
GO
-- the message types and the contract
CREATE MESSAGE TYPE [//Counter/Shelf/Ask] VALIDATION = WELL_FORMED_XML;
CREATE MESSAGE TYPE [//Counter/Shelf/Answer] VALIDATION = WELL_FORMED_XML;
GO
CREATE CONTRACT [//Counter/Shelf/Contract]
    ([//Counter/Shelf/Ask] SENT BY INITIATOR, [//Counter/Shelf/Answer] SENT BY TARGET);
GO
-- the queues and services of both sides, and the target's log
CREATE QUEUE ShelfTargetQueue;
CREATE SERVICE [//Counter/Shelf/TargetService] ON QUEUE ShelfTargetQueue
    ([//Counter/Shelf/Contract]);
CREATE QUEUE ShelfInitiatorQueue;
CREATE SERVICE [//Counter/Shelf/InitiatorService] ON QUEUE ShelfInitiatorQueue;
GO
CREATE TABLE dbo.ShelfLog (id INT IDENTITY(1, 1) PRIMARY KEY, message_type SYSNAME,
    shelf INT, logged_at DATETIME DEFAULT GETDATE());
GO
-- the initiator begins the conversation and sends its request
DECLARE @InitDlgHandle UNIQUEIDENTIFIER;
DECLARE @RequestMsg NVARCHAR(100);
BEGIN TRANSACTION;
BEGIN DIALOG @InitDlgHandle
    FROM SERVICE [//Counter/Shelf/InitiatorService]
    TO SERVICE N'//Counter/Shelf/TargetService'
    ON CONTRACT [//Counter/Shelf/Contract]
    WITH ENCRYPTION = OFF;
SELECT @RequestMsg = N'<Ask><Shelf>12</Shelf></Ask>';
SEND ON CONVERSATION @InitDlgHandle MESSAGE TYPE [//Counter/Shelf/Ask] (@RequestMsg);
PRINT 'sent: ' + @RequestMsg;
COMMIT TRANSACTION;
GO
-- the target receives the request, logs it and replies
DECLARE @RecvReqDlgHandle UNIQUEIDENTIFIER;
DECLARE @RecvReqMsg NVARCHAR(100);
DECLARE @RecvReqMsgName SYSNAME;
DECLARE @Shelf INT;
BEGIN TRANSACTION;
WAITFOR
( RECEIVE TOP (1)
    @RecvReqDlgHandle = conversation_handle,
    @RecvReqMsg = message_body,
    @RecvReqMsgName = message_type_name
  FROM ShelfTargetQueue
), TIMEOUT 1000;
IF @RecvReqMsgName = N'//Counter/Shelf/Ask'
BEGIN
    SET @Shelf = CAST(@RecvReqMsg AS XML).value('(/Ask/Shelf/text())[1]', 'INT');
    INSERT INTO dbo.ShelfLog (message_type, shelf) VALUES (@RecvReqMsgName, @Shelf);
    DECLARE @ReplyMsg NVARCHAR(100);
    SELECT @ReplyMsg = N'<Answer><Count>' + CAST(count(*) * 7 AS NVARCHAR(10))
        + N'</Count></Answer>' FROM dbo.ShelfLog WHERE shelf = @Shelf;
    SEND ON CONVERSATION @RecvReqDlgHandle MESSAGE TYPE [//Counter/Shelf/Answer] (@ReplyMsg);
    END CONVERSATION @RecvReqDlgHandle;
    PRINT 'replied: ' + @ReplyMsg;
END
COMMIT TRANSACTION;
GO
-- the initiator receives the reply and ends its side
DECLARE @RecvReplyMsg NVARCHAR(100);
DECLARE @RecvReplyDlgHandle UNIQUEIDENTIFIER;
BEGIN TRANSACTION;
WAITFOR
( RECEIVE TOP (1)
    @RecvReplyDlgHandle = conversation_handle,
    @RecvReplyMsg = message_body
  FROM ShelfInitiatorQueue
), TIMEOUT 1000;
END CONVERSATION @RecvReplyDlgHandle;
PRINT 'received: ' + @RecvReplyMsg;
COMMIT TRANSACTION;
GO
-- what the target logged, and how the conversation ended on both sides
SELECT message_type, shelf FROM dbo.ShelfLog;
SELECT state_desc FROM sys.conversation_endpoints;
SELECT count(*) AS waiting FROM sys.transmission_queue;
"""


def test_the_single_database_tutorial_completes_through_one_pybroker_sql(tmp_path, capsys,
                                                                         monkeypatch):
    import io
    import json

    from tests.cli_helpers import call

    path = tmp_path / "counter.duckdb"
    with pybroker.connect(path, worker=False) as inst:
        inst.create_database("Counter")
    for run in range(2):  # the guards let it run again on what the first run left
        monkeypatch.setattr("sys.stdin", io.StringIO(SINGLE_DATABASE_TUTORIAL))
        code, out, err = call(["sql", path, "-d", "Counter", "--json", "-"], capsys)
        assert code == 0, err
        assert err.splitlines() == ["sent: <Ask><Shelf>12</Shelf></Ask>",
                                    "replied: <Answer><Count>7</Count></Answer>",
                                    "received: <Answer><Count>7</Count></Answer>"], run
        logged, states, waiting = json.loads(out)
        assert logged["rows"] == [["//Counter/Shelf/Ask", 12]]  # the log was made anew
        assert states["rows"] == [["CLOSED"], ["CLOSED"]]
        assert waiting["rows"] == [[0]]
    with pybroker.connect(path, worker=False) as inst:
        assert inst.sql('SELECT message_type FROM Counter_dbo.ShelfLog').fetchall() == [
            ("//Counter/Shelf/Ask",)]
