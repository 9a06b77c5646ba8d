"""USE, CREATE/DROP DATABASE, DB_ID() and ALTER DATABASE ... SET <broker option> in a T-SQL
script (pybroker.core.tsql.database_statements, pybroker.api.database_script), and a script in
the shape of the tutorial of a conversation between two databases through `pybroker sql`."""

from __future__ import annotations

import io

import pytest
from cli_helpers import call

import pybroker
from pybroker.core.tsql.batches import parse_batches
from pybroker.core.tsql.database_statements import AlterDatabaseSet, Use
from pybroker.core.tsql.error_numbers import TsqlError
from pybroker.errors import (
    AlreadyExistsError,
    InvalidArgumentError,
    MasterOnlyError,
    TsqlSyntaxError,
    UnsupportedOptionError,
    UnsupportedStatementError,
)


@pytest.fixture
def inst():
    instance = pybroker.connect(None, worker=False)
    yield instance
    instance.close()


def databases(inst) -> list[str]:
    return [row[0] for row in inst.sql("SELECT name FROM sys.databases ORDER BY database_id")
            .fetchall()]


def number(inst, statement: str) -> int:
    """The error number a statement raises, as a CATCH block sees it (after what comes
    before a '|', run outside the TRY block)."""
    before, _, statement = statement.rpartition("|")
    results = inst.execute(f"{before} BEGIN TRY {statement} END TRY BEGIN CATCH "
                           "SELECT ERROR_NUMBER() AS n END CATCH IF @@TRANCOUNT > 0 ROLLBACK")
    return results[0].rows[0][0]


# -- USE -------------------------------------------------------------------------------------


def test_use_switches_the_database_for_what_follows_across_go(inst):
    inst.create_database("Shop")
    inst.create_database("Depot")
    results = inst.execute(
        "SELECT DB_ID() AS id;\nUSE Shop;\nCREATE QUEUE InShop;\nGO\n"
        "SELECT DB_ID() AS id;\nUSE [Depot]; CREATE QUEUE InDepot; SELECT DB_ID() AS id")
    assert [r.rows[0][0] for r in results] == [1, 5, 6]  # master, Shop, Depot
    assert [q.name for q in inst.database("Shop").queues()] == ["InShop"]
    assert [q.name for q in inst.database("Depot").queues()] == ["InDepot"]
    assert inst.database("master").queues() == []


def test_use_in_database_execute_runs_over_several_databases(inst):
    inst.create_database("Shop")
    inst.database("Shop").execute("USE master;\nGO\nCREATE QUEUE q")  # a DDL-only batch
    assert [q.name for q in inst.database("master").queues()] == ["q"]
    assert inst.database("Shop").queues() == []


def test_use_master_reads_what_follows_with_masters_grammar():
    after = parse_batches("USE master\nGO\nALTER DATABASE Shop SET PARTNER OFF")
    assert [type(s).__name__ for b in after for s in b.statements] == [
        "Use", "AlterDatabasePartner"]
    with pytest.raises(MasterOnlyError, match="CREATE ENDPOINT at line 1, column 11"):
        parse_batches("USE Shop; CREATE ENDPOINT e FOR SERVICE_BROKER", master=True)


def test_use_of_a_database_that_does_not_exist_stops_the_script(inst):
    with pytest.raises(TsqlError, match="USE at line 1, column 1 failed: database 'Nope' "
                       "does not exist") as caught:
        inst.execute("USE Nope; CREATE QUEUE q")
    assert caught.value.number == 911
    assert inst.database("master").queues() == []


@pytest.mark.parametrize(("text", "where"), [
    ("IF 1 = 1 USE Shop", "USE at line 1, column 10"),
    ("BEGIN\n  USE Shop\nEND", "USE at line 2, column 3"),
    ("CREATE PROCEDURE p AS\nUSE Shop", "USE at line 2, column 1"),
])
def test_use_is_refused_below_the_top_of_a_batch(text, where):
    with pytest.raises(UnsupportedStatementError, match=f"{where} is not supported here"):
        parse_batches(text)


def test_use_without_a_name_is_refused_with_its_place():
    with pytest.raises(TsqlSyntaxError, match="expected a database name after USE but found "
                       "the end of the batch at line 2, column 4"):
        parse_batches("SELECT 1;\nUSE")


def test_a_refused_script_changes_nothing(inst):
    with pytest.raises(TsqlSyntaxError, match="line 4, column 1"):
        inst.execute("CREATE DATABASE Shop;\nGO\nUSE Shop; CREATE QUEUE q;\nNOT_A_STATEMENT")
    assert databases(inst) == ["master", "msdb"]


# -- CREATE / DROP DATABASE, DB_ID() -----------------------------------------------------------


def test_create_database_makes_a_database_with_its_own_broker(inst):
    inst.execute("CREATE DATABASE Shop")
    shop = inst.database("Shop")
    assert shop.broker_instance != inst.database("master").broker_instance
    assert [r.name for r in shop.routes()] == ["AutoCreatedLocal"]
    assert inst.sql("SELECT is_broker_enabled, is_trustworthy_on, is_honor_broker_priority_on "
                    "FROM sys.databases WHERE name = 'Shop'").fetchall() == [
        (True, False, False)]


def test_db_id_names_a_database_or_is_null(inst):
    inst.create_database("Shop")
    [result] = inst.execute("SELECT DB_ID('shop') AS a, DB_ID(N'Nope') AS b, "
                            "DB_ID(NULL) AS c, DB_ID() AS d")
    assert result.rows == [(5, None, None, 1)]


def test_the_guard_drops_a_database_and_everything_it_holds(inst):
    inst.create_database("Shop")
    inst.execute("""USE Shop;
CREATE QUEUE q; CREATE SERVICE s ON QUEUE q ([DEFAULT]);
CREATE ROUTE r WITH ADDRESS = 'tcp://far:4022';
GO
CREATE PROCEDURE dbo.p AS PRINT 1;
GO
DECLARE @h UNIQUEIDENTIFIER;
BEGIN DIALOG @h FROM SERVICE s TO SERVICE 's' WITH ENCRYPTION = OFF;
SEND ON CONVERSATION @h (N'x');""")
    inst.execute("IF DB_ID('Shop') IS NOT NULL DROP DATABASE Shop;\n"
                 "IF DB_ID('Shop') IS NOT NULL DROP DATABASE Shop;")  # the second: no-op
    assert databases(inst) == ["master", "msdb"]
    for view in ("service_queues", "services", "conversation_endpoints", "transmission_queue",
                 "procedures"):
        assert inst.sql(f"SELECT count(*) FROM sys.{view}").fetchone() == (0,), view
    inst.execute("CREATE DATABASE Shop")  # the name is free again, and so is all it held
    assert inst.database("Shop").queues() == []
    inst.execute("DROP DATABASE IF EXISTS Nope, Shop")
    assert databases(inst) == ["master", "msdb"]


def test_instance_drop_database(inst):
    inst.create_database("Shop")
    inst.drop_database("Shop")
    assert databases(inst) == ["master", "msdb"]
    with pytest.raises(InvalidArgumentError, match="system database"):
        inst.drop_database("msdb")


@pytest.mark.parametrize(("statement", "expected"), [
    ("DROP DATABASE Nope", 3701),
    ("DROP DATABASE msdb", 3708),
    ("USE Shop; | DROP DATABASE Shop", 3702),
    ("BEGIN TRANSACTION; DROP DATABASE Shop", 226),
    ("BEGIN TRANSACTION; CREATE DATABASE Other", 226),
    ("BEGIN TRANSACTION; ALTER DATABASE Shop SET NEW_BROKER", 226),
    ("ALTER DATABASE Nope SET ENABLE_BROKER", 911),
])
def test_sql_servers_errors_of_the_database_statements(inst, statement, expected):
    inst.create_database("Shop")
    guid = inst.database("Shop").broker_instance
    assert number(inst, statement) == expected
    assert databases(inst) == ["master", "msdb", "Shop"]  # nothing changed
    assert inst.database("Shop").broker_instance == guid


def test_create_database_of_a_name_taken_is_refused(inst):
    inst.create_database("Shop")
    with pytest.raises(AlreadyExistsError, match="CREATE DATABASE at line 1, column 1 failed: "
                       "database 'shop' already exists as 'Shop'"):
        inst.execute("CREATE DATABASE shop")


@pytest.mark.parametrize(("text", "error", "words"), [
    ("CREATE DATABASE Shop ON PRIMARY (NAME = a)", UnsupportedOptionError,
     "CREATE DATABASE ... ON at line 1, column 22"),
    ("CREATE DATABASE", TsqlSyntaxError, "expected a database name but found the end"),
    ("DROP DATABASE Shop,", TsqlSyntaxError, "database name after ',' but found the end"),
    ("DROP DATABASE [select] extra", TsqlSyntaxError, "'extra' at line 1, column 24"),
])
def test_bad_database_statements_are_refused_with_their_place(inst, text, error, words):
    with pytest.raises(error, match=words):
        inst.execute(text)
    assert databases(inst) == ["master", "msdb"]


# -- ALTER DATABASE ... SET -------------------------------------------------------------------


def options(inst, name: str) -> tuple:
    return inst.sql("SELECT is_broker_enabled, is_trustworthy_on, is_honor_broker_priority_on "
                    "FROM sys.databases WHERE name = $1", [name]).fetchone()


def test_alter_database_sets_the_brokers_options(inst):
    inst.create_database("Shop")
    inst.execute("ALTER DATABASE Shop SET DISABLE_BROKER;\n"
                 "ALTER DATABASE Shop SET TRUSTWORTHY ON WITH NO_WAIT;\n"
                 "ALTER DATABASE Shop SET HONOR_BROKER_PRIORITY ON WITH ROLLBACK AFTER 5 SECONDS")
    assert options(inst, "Shop") == (False, True, True)
    inst.execute("USE Shop; ALTER DATABASE CURRENT SET ENABLE_BROKER WITH ROLLBACK IMMEDIATE;"
                 " ALTER DATABASE CURRENT SET TRUSTWORTHY OFF")
    assert options(inst, "Shop") == (True, False, True)
    assert options(inst, "master") == (True, False, False)


def _conversation(inst):
    """A conversation from Depot's service i to Shop's service s, its first message
    delivered into Shop's queue q."""
    inst.create_database("Shop")
    inst.create_database("Depot")
    shop, depot = inst.database("Shop"), inst.database("Depot")
    shop.create_queue("q")
    shop.create_service("s", queue="q", contracts=["DEFAULT"])
    depot.create_queue("iq")
    depot.create_service("i", queue="iq")
    depot.begin_dialog("i", "s").send(b"x")
    inst.run_pending()
    return shop


def test_new_broker_gives_a_new_identifier_and_removes_the_conversations(inst):
    shop = _conversation(inst)
    [results] = inst.execute("ALTER DATABASE Shop SET NEW_BROKER; USE Shop;"
                             " SELECT DB_ID() AS id")
    assert results.rows == [(5,)]
    assert inst.database("Shop").broker_instance != shop.broker_instance
    assert inst.sql("SELECT database_name FROM sys.conversation_endpoints").fetchall() == [
        ("Depot",)]  # the far side is not told, as with END CONVERSATION WITH CLEANUP
    assert inst.database("Shop").receive("q") == []


def test_error_broker_conversations_ends_them_with_an_error(inst):
    shop = _conversation(inst)
    guid = shop.broker_instance
    inst.execute("ALTER DATABASE Shop SET ERROR_BROKER_CONVERSATIONS")
    inst.run_pending()
    [error] = inst.database("Depot").receive("iq")
    assert error.message_type_name == "http://schemas.microsoft.com/SQL/ServiceBroker/Error"
    assert b"ERROR_BROKER_CONVERSATIONS" in error.message_body.replace(b"\x00", b"")
    assert inst.database("Shop").receive("q") == []  # ending removed its messages
    assert inst.database("Shop").broker_instance == guid


@pytest.mark.parametrize("disabled", ["Shop", "Depot"])
def test_disable_broker_keeps_messages_in_the_transmission_queue(inst, disabled):
    _conversation(inst)
    inst.execute(f"ALTER DATABASE {disabled} SET DISABLE_BROKER")
    depot = inst.database("Depot")
    [(handle,)] = inst.sql("SELECT conversation_handle FROM sys.conversation_endpoints "
                           "WHERE database_name = 'Depot'").fetchall()
    depot.conversation(str(handle)).send(b"y")
    inst.run_pending()
    assert inst.sql("SELECT transmission_status FROM sys.transmission_queue").fetchall() == [
        ("Service Broker is disabled in the database.",)]
    inst.execute(f"ALTER DATABASE {disabled} SET ENABLE_BROKER")
    inst.run_pending()
    assert inst.sql("SELECT count(*) FROM sys.transmission_queue").fetchone() == (0,)
    assert [m.message_body for m in inst.database("Shop").receive("q", max_messages=5)] == [
        b"x", b"y"]


@pytest.mark.parametrize(("text", "error", "words"), [
    ("ALTER DATABASE Shop SET RECOVERY SIMPLE", UnsupportedOptionError,
     "SET RECOVERY at line 2, column 25 is not supported: pybroker sets ENABLE_BROKER"),
    ("ALTER DATABASE Shop SET TRUSTWORTHY", TsqlSyntaxError,
     "expected ON or OFF after TRUSTWORTHY but found the end of the batch at line 2, col"),
    ("ALTER DATABASE Shop SET ENABLE_BROKER WITH ROLLBACK", TsqlSyntaxError,
     "IMMEDIATE or AFTER after ROLLBACK"),
    ("ALTER DATABASE Shop SET ENABLE_BROKER, TRUSTWORTHY ON", TsqlSyntaxError,
     "one option per ALTER DATABASE statement"),
    ("ALTER DATABASE Shop SET PARTNER OFF", MasterOnlyError, "SET PARTNER at line 2, column 1"),
])
def test_bad_alter_database_is_refused_with_its_place(inst, text, error, words):
    inst.create_database("Shop")
    with pytest.raises(error, match=words):
        inst.database("Shop").execute(f"ALTER DATABASE Shop SET DISABLE_BROKER;\n{text}")
    assert options(inst, "Shop") == (True, False, False)  # the first statement did not run


def test_alter_database_parses_as_sql_server_writes_it():
    [batch] = parse_batches("ALTER DATABASE [Shop] SET HONOR_BROKER_PRIORITY OFF")
    [statement] = batch.statements
    assert isinstance(statement, AlterDatabaseSet)
    assert (statement.database, statement.option, statement.value) == (
        "Shop", "HONOR_BROKER_PRIORITY", False)
    [batch] = parse_batches("USE [Shop]")
    assert isinstance(batch.statements[0], Use)


# -- BEGIN DIALOG's options, with or without commas -------------------------------------------


def test_begin_dialog_options_need_no_commas():
    head = ("DECLARE @h UNIQUEIDENTIFIER, @g UNIQUEIDENTIFIER;\n"
            "BEGIN DIALOG @h FROM SERVICE a TO SERVICE 'b' WITH ")
    forms = ["RELATED_CONVERSATION = @g LIFETIME = 600 ENCRYPTION = OFF",
             "RELATED_CONVERSATION = @g, LIFETIME = 600, ENCRYPTION = OFF",
             "RELATED_CONVERSATION = @g, LIFETIME = 600 ENCRYPTION = OFF"]
    parsed = {repr(parse_batches(head + form)[0].statements[1]).replace(
        "column=", "").split("token=")[0] for form in forms}
    assert len(parsed) == 1
    with pytest.raises(TsqlSyntaxError, match="LIFETIME is given twice"):
        parse_batches(head + "LIFETIME = 1 LIFETIME = 2")


# -- the tutorial of a conversation between two databases --------------------------------------

TWO_DATABASES = """\
-- Two databases of one instance: a request from the initiator's service, a reply from the
-- target's, each side ending its half of the conversation.
USE master;
GO
IF DB_ID(N'TargetDB') IS NOT NULL
    DROP DATABASE TargetDB;
GO
CREATE DATABASE TargetDB;
GO
ALTER DATABASE TargetDB SET TRUSTWORTHY ON;
ALTER DATABASE TargetDB SET ENABLE_BROKER WITH ROLLBACK IMMEDIATE;
GO
IF DB_ID(N'InitiatorDB') IS NOT NULL
    DROP DATABASE InitiatorDB;
GO
CREATE DATABASE InitiatorDB;
GO
ALTER DATABASE InitiatorDB SET TRUSTWORTHY ON;
GO
USE TargetDB;
GO
CREATE MESSAGE TYPE [//Both/TwoDatabases/Request] VALIDATION = WELL_FORMED_XML;
CREATE MESSAGE TYPE [//Both/TwoDatabases/Reply] VALIDATION = WELL_FORMED_XML;
GO
CREATE CONTRACT [//Both/TwoDatabases/Contract]
    ([//Both/TwoDatabases/Request] SENT BY INITIATOR,
     [//Both/TwoDatabases/Reply] SENT BY TARGET);
GO
CREATE QUEUE TargetQueueTwoDB;
CREATE SERVICE [//Target/TwoDatabases/TargetService]
    ON QUEUE TargetQueueTwoDB ([//Both/TwoDatabases/Contract]);
GO
USE InitiatorDB;
GO
CREATE MESSAGE TYPE [//Both/TwoDatabases/Request] VALIDATION = WELL_FORMED_XML;
CREATE MESSAGE TYPE [//Both/TwoDatabases/Reply] VALIDATION = WELL_FORMED_XML;
GO
CREATE CONTRACT [//Both/TwoDatabases/Contract]
    ([//Both/TwoDatabases/Request] SENT BY INITIATOR,
     [//Both/TwoDatabases/Reply] SENT BY TARGET);
GO
CREATE QUEUE InitiatorQueueTwoDB;
CREATE SERVICE [//Initiator/TwoDatabases/InitiatorService] ON QUEUE InitiatorQueueTwoDB;
GO
-- The initiator begins the conversation and sends its request.
USE InitiatorDB;
GO
DECLARE @dialog UNIQUEIDENTIFIER;
DECLARE @request NVARCHAR(100);
BEGIN TRANSACTION;
BEGIN DIALOG @dialog
    FROM SERVICE [//Initiator/TwoDatabases/InitiatorService]
    TO SERVICE N'//Target/TwoDatabases/TargetService'
    ON CONTRACT [//Both/TwoDatabases/Contract]
    WITH ENCRYPTION = OFF;
SELECT @request = N'<Request>a message for the target service</Request>';
SEND ON CONVERSATION @dialog MESSAGE TYPE [//Both/TwoDatabases/Request] (@request);
PRINT N'sent: ' + @request;
COMMIT TRANSACTION;
GO
-- The target receives the request, replies and ends its side.
USE TargetDB;
GO
DECLARE @handle UNIQUEIDENTIFIER;
DECLARE @body NVARCHAR(100);
DECLARE @type SYSNAME;
BEGIN TRANSACTION;
WAITFOR (RECEIVE TOP (1)
    @handle = conversation_handle,
    @body = message_body,
    @type = message_type_name
  FROM TargetQueueTwoDB), TIMEOUT 5000;
PRINT N'received: ' + @body;
IF @type = N'//Both/TwoDatabases/Request'
BEGIN
    DECLARE @reply NVARCHAR(100);
    SELECT @reply = N'<Reply>a message for the initiator service</Reply>';
    SEND ON CONVERSATION @handle MESSAGE TYPE [//Both/TwoDatabases/Reply] (@reply);
    END CONVERSATION @handle;
END
PRINT N'sent: ' + @reply;
COMMIT TRANSACTION;
GO
-- The initiator receives the reply and ends its side.
USE InitiatorDB;
GO
DECLARE @handle UNIQUEIDENTIFIER;
DECLARE @body NVARCHAR(100);
BEGIN TRANSACTION;
WAITFOR (RECEIVE TOP (1)
    @handle = conversation_handle,
    @body = message_body
  FROM InitiatorQueueTwoDB), TIMEOUT 5000;
END CONVERSATION @handle;
PRINT N'received: ' + @body;
COMMIT TRANSACTION;
GO
"""


def test_the_two_database_tutorial_completes_through_pybroker_sql(tmp_path, capsys,
                                                                  monkeypatch):
    path = tmp_path / "two.duckdb"
    pybroker.connect(path, worker=False).close()
    monkeypatch.setattr("sys.stdin", io.StringIO(TWO_DATABASES))
    code, _, err = call(["sql", path, "-"], capsys)  # no -d: it begins in master
    assert code == 0, err
    assert err.splitlines() == [
        "sent: <Request>a message for the target service</Request>",
        "received: <Request>a message for the target service</Request>",
        "sent: <Reply>a message for the initiator service</Reply>",
        "received: <Reply>a message for the initiator service</Reply>"]
    with pybroker.connect(path, worker=False) as inst:
        assert inst.sql("SELECT database_name, service_name, state_desc FROM "
                        "sys.conversation_endpoints ORDER BY database_name").fetchall() == [
            ("InitiatorDB", "//Initiator/TwoDatabases/InitiatorService", "CLOSED"),
            ("TargetDB", "//Target/TwoDatabases/TargetService", "CLOSED")]
        assert inst.sql("SELECT count(*) FROM sys.transmission_queue").fetchone() == (0,)
        assert options(inst, "TargetDB") == (True, True, False)


# -- CREATE / ALTER / DROP BROKER PRIORITY ------------------------------------------------------


def priorities(inst) -> list[tuple]:
    return inst.sql("SELECT database_name, name, service_contract_name, local_service_name, "
                    "remote_service_name, priority FROM sys.conversation_priorities "
                    "ORDER BY priority_id").fetchall()


def test_broker_priorities_are_kept_per_database(inst):
    inst.create_database("Shop")
    inst.database("Shop").execute("""
CREATE BROKER PRIORITY ToTarget FOR CONVERSATION
    SET (CONTRACT_NAME = [//Both/Contract]
         LOCAL_SERVICE_NAME = [//Initiator/Service],
         REMOTE_SERVICE_NAME = N'//Target/Service', PRIORITY_LEVEL = 3);
CREATE BROKER PRIORITY Everything FOR CONVERSATION;
ALTER BROKER PRIORITY everything FOR CONVERSATION SET (PRIORITY_LEVEL = 9, CONTRACT_NAME = c);
ALTER BROKER PRIORITY ToTarget FOR CONVERSATION SET (LOCAL_SERVICE_NAME = ANY);""")
    assert priorities(inst) == [
        ("Shop", "ToTarget", "//Both/Contract", None, "//Target/Service", 3),
        ("Shop", "Everything", "c", None, None, 9)]
    inst.execute("USE Shop; DROP BROKER PRIORITY ToTarget; ALTER BROKER PRIORITY "
                 "Everything FOR CONVERSATION SET (PRIORITY_LEVEL = DEFAULT)")
    assert priorities(inst) == [("Shop", "Everything", "c", None, None, 5)]
    inst.execute("DROP DATABASE Shop")
    assert priorities(inst) == []


@pytest.mark.parametrize(("text", "error", "words"), [
    ("CREATE BROKER PRIORITY p FOR CONVERSATION SET (PRIORITY_LEVEL = 11)", TsqlSyntaxError,
     "priority level from 1 to 10, or DEFAULT, after PRIORITY_LEVEL = but found '11' at line 2"),
    ("CREATE BROKER PRIORITY p FOR CONVERSATION SET (REMOTE_SERVICE_NAME = s)",
     TsqlSyntaxError, "far service's name as a string"),
    ("CREATE BROKER PRIORITY p SET (PRIORITY_LEVEL = 1)", TsqlSyntaxError,
     "FOR CONVERSATION after the priority's name"),
    ("CREATE BROKER PRIORITY p FOR CONVERSATION SET (PRIORITY_LEVEL = 1, PRIORITY_LEVEL = 2)",
     TsqlSyntaxError, "PRIORITY_LEVEL is given twice"),
    ("ALTER BROKER PRIORITY p FOR CONVERSATION", TsqlSyntaxError,
     "with at least one option after FOR"),
    ("CREATE BROKER PRIORITY Kept FOR CONVERSATION", pybroker.BrokerError,
     "'kept' already exists"),
    ("DROP BROKER PRIORITY nope", pybroker.BrokerError, "'nope' does not exist"),
])
def test_bad_broker_priorities_are_refused_and_change_nothing(inst, text, error, words):
    inst.database("master").execute("CREATE BROKER PRIORITY kept FOR CONVERSATION")
    with pytest.raises(error, match=words):
        inst.execute(f"CREATE BROKER PRIORITY other FOR CONVERSATION;\n{text}")
    assert priorities(inst) == [("master", "kept", None, None, None, 5)]


def test_db_id_in_a_procedure_activation_starts(inst):
    from pybroker.core.tsql.script import run_procedure

    shop = inst.create_database("Shop")
    shop.execute("CREATE PROCEDURE dbo.Reader AS\nIF DB_ID('master') = 1 RETURN DB_ID()")
    assert run_procedure(shop, "dbo", "Reader") == 5  # as activation runs it (C8)
