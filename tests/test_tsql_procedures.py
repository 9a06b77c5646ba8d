"""T-SQL programs past control flow (``Database.execute()``, ``pybroker sql``): BEGIN TRY ...
END CATCH with the ERROR_ functions and XACT_STATE(), THROW and RAISERROR; stored procedures
(CREATE [OR ALTER] / ALTER / DROP PROCEDURE, EXEC with arguments by position and by name,
defaults, OUTPUT and RETURN codes, sys.procedures and sys.sql_modules); and activation by a
stored procedure. The proof is a script in the shape of SQL Server's tutorial on internal
activation with a stored procedure, run unchanged by one ``pybroker sql``; then each
construct, its refusals (with line and column), and a refused batch that changes nothing."""

from __future__ import annotations

import io
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pybroker
from pybroker import TsqlSyntaxError, UnsupportedStatementError
from pybroker.core.tsql.error_numbers import TsqlError
from pybroker.errors import ConversationError
from tests.cli_helpers import call
from tests.tsql_helpers import printed, program_database
from tests.wire_helpers import wait_for

END_DIALOG = "http://schemas.microsoft.com/SQL/ServiceBroker/EndDialog"

# The tutorial's steps in order: message types, contract, queues and services; a target
# procedure that loops on WAITFOR (RECEIVE), branches on the message type, replies and ends
# the conversation; ALTER QUEUE to activate it; the initiator sends a request and receives
# the reply (and ends its side).
ACTIVATION_TUTORIAL = """
-- the message types and the contract
CREATE MESSAGE TYPE [//Depot/Stock/Query] VALIDATION = WELL_FORMED_XML;
CREATE MESSAGE TYPE [//Depot/Stock/Count] VALIDATION = WELL_FORMED_XML;
GO
CREATE CONTRACT [//Depot/Stock/Contract]
    ([//Depot/Stock/Query] SENT BY INITIATOR, [//Depot/Stock/Count] SENT BY TARGET);
GO
-- the target's queue and service, then the initiator's
CREATE QUEUE StockTargetQueue;
CREATE SERVICE [//Depot/Stock/TargetService] ON QUEUE StockTargetQueue
    ([//Depot/Stock/Contract]);
GO
CREATE QUEUE StockInitiatorQueue;
CREATE SERVICE [//Depot/Stock/InitiatorService] ON QUEUE StockInitiatorQueue;
GO
-- the procedure activation starts on the target's queue
CREATE PROCEDURE StockTargetProc
AS
    DECLARE @Handle UNIQUEIDENTIFIER;
    DECLARE @Body NVARCHAR(100);
    DECLARE @Type SYSNAME;
    WHILE (1 = 1)
    BEGIN
        BEGIN TRANSACTION;
        WAITFOR
        ( RECEIVE TOP (1)
            @Handle = conversation_handle,
            @Body = message_body,
            @Type = message_type_name
          FROM StockTargetQueue
        ), TIMEOUT 200;
        IF (@@ROWCOUNT = 0)
        BEGIN
            ROLLBACK TRANSACTION;
            BREAK;
        END
        IF @Type = N'//Depot/Stock/Query'
        BEGIN
            DECLARE @Answer NVARCHAR(100);
            SELECT @Answer = N'<Count>42</Count>';
            SEND ON CONVERSATION @Handle MESSAGE TYPE [//Depot/Stock/Count] (@Answer);
            END CONVERSATION @Handle;
        END
        ELSE IF @Type = N'http://schemas.microsoft.com/SQL/ServiceBroker/EndDialog'
            END CONVERSATION @Handle;
        ELSE IF @Type = N'http://schemas.microsoft.com/SQL/ServiceBroker/Error'
            END CONVERSATION @Handle;
        COMMIT TRANSACTION;
    END
GO
-- activation of the target's queue by the procedure
ALTER QUEUE StockTargetQueue
    WITH ACTIVATION
    ( STATUS = ON,
      PROCEDURE_NAME = StockTargetProc,
      MAX_QUEUE_READERS = 10,
      EXECUTE AS SELF );
GO
-- the initiator asks
DECLARE @InitHandle UNIQUEIDENTIFIER;
DECLARE @Query NVARCHAR(100);
BEGIN TRANSACTION;
BEGIN DIALOG @InitHandle
    FROM SERVICE [//Depot/Stock/InitiatorService]
    TO SERVICE N'//Depot/Stock/TargetService'
    ON CONTRACT [//Depot/Stock/Contract]
    WITH ENCRYPTION = OFF;
SELECT @Query = N'<Query>how many crates?</Query>';
SEND ON CONVERSATION @InitHandle MESSAGE TYPE [//Depot/Stock/Query] (@Query);
PRINT N'sent: ' + @Query;
COMMIT TRANSACTION;
GO
-- the initiator reads the reply and ends its side
DECLARE @ReplyHandle UNIQUEIDENTIFIER;
DECLARE @Reply NVARCHAR(100);
BEGIN TRANSACTION;
WAITFOR
( RECEIVE TOP (1)
    @ReplyHandle = conversation_handle,
    @Reply = message_body
  FROM StockInitiatorQueue
), TIMEOUT 5000;
END CONVERSATION @ReplyHandle;
PRINT N'received: ' + @Reply;
COMMIT TRANSACTION;
GO
"""


def test_the_activation_tutorial_completes_through_pybroker_sql(tmp_path, capsys,
                                                                 monkeypatch):
    path = tmp_path / "depot.duckdb"
    with pybroker.connect(path, worker=False) as inst:
        inst.create_database("Depot")
    monkeypatch.setattr("sys.stdin", io.StringIO(ACTIVATION_TUTORIAL))
    code, _, err = call(["sql", path, "-d", "Depot", "-"], capsys)
    assert code == 0, err
    assert err.splitlines() == ["sent: <Query>how many crates?</Query>",
                                "received: <Count>42</Count>"]
    with pybroker.connect(path, worker=False) as inst:
        states = inst.sql("SELECT service_name, state_desc FROM sys.conversation_endpoints "
                          "ORDER BY service_name").fetchall()
        assert states == [("//Depot/Stock/InitiatorService", "CLOSED"),
                          ("//Depot/Stock/TargetService", "CLOSED")]
        assert inst.sql("SELECT count(*) FROM sys.transmission_queue").fetchone() == (0,)
        assert inst.sql("SELECT count(*) FROM queue_messages").fetchone() == (0,)
        assert inst.sql("SELECT count(*) FROM sys.broker_events WHERE event_class = "
                        "'Broker:Activation'").fetchone() == (0,)  # the procedure never failed
        assert inst.sql("SELECT name, type_desc FROM sys.procedures").fetchall() == [
            ("StockTargetProc", "SQL_STORED_PROCEDURE")]
        [(definition,)] = inst.sql("SELECT definition FROM sys.sql_modules").fetchall()
        assert definition.startswith("CREATE PROCEDURE StockTargetProc\nAS\n")
        assert definition.endswith("COMMIT TRANSACTION;\n    END")


# -- activation by a stored procedure, in process -------------------------------------------


ANSWERING = """
CREATE PROCEDURE dbo.Answer AS
DECLARE @h UNIQUEIDENTIFIER, @t SYSNAME;
WHILE 1 = 1
BEGIN
    BEGIN TRANSACTION;
    WAITFOR (RECEIVE TOP (1) @h = conversation_handle, @t = message_type_name FROM TQ),
        TIMEOUT 100;
    IF @@ROWCOUNT = 0 BEGIN ROLLBACK; RETURN 0 END
    IF @t = N'DEFAULT' SEND ON CONVERSATION @h (N'answer');
    ELSE END CONVERSATION @h;
    COMMIT;
END
"""


def _pair(inst: pybroker.Instance, procedure: str) -> pybroker.Database:
    db = inst.create_database("Act")
    db.execute("CREATE QUEUE IQ; CREATE SERVICE I ON QUEUE IQ;\nCREATE QUEUE TQ WITH "
               f"ACTIVATION (STATUS = ON, PROCEDURE_NAME = {procedure}, MAX_QUEUE_READERS = 2,"
               " EXECUTE AS 'someone'); CREATE SERVICE T ON QUEUE TQ ([DEFAULT])")
    inst.start_activation(check_interval=0.05)
    return db


def _ask(db: pybroker.Database) -> pybroker.Conversation:
    conversation = db.begin_dialog("I", "T")
    conversation.send("question")
    return conversation


def test_a_queue_names_a_procedure_before_it_exists_and_activation_runs_it_once_it_does():
    with pybroker.connect(None) as inst:
        db = _pair(inst, "Act.dbo.Answer")
        _ask(db)
        events = wait_for(lambda: inst.sql(
            "SELECT description FROM sys.broker_events WHERE event_class = "
            "'Broker:Activation'").fetchall(), what="the failed activation")
        assert events == [("queue Act.TQ: the activation procedure Act.dbo.Answer does not "
                           "exist in database Act: CREATE PROCEDURE it (activation starts "
                           "it once it exists)",)]
        db.execute(ANSWERING)
        [reply] = db.receive("IQ", timeout=30)
        assert reply.message_body == b"answer"
        assert inst.sql("SELECT name, execute_as_principal_id FROM sys.service_queues "
                        "WHERE name = 'TQ'").fetchall() != []


# Each reader receives one message and, its transaction still open, looks (up to 200 times,
# 50 ms apart: a WAITFOR on a queue nobody sends to) until two groups of TQ are locked, or
# the other message has left TQ (another reader took it and committed); it answers with
# how many groups it saw locked.
SIDE_BY_SIDE = """
CREATE PROCEDURE dbo.Together AS
DECLARE @h UNIQUEIDENTIFIER, @t SYSNAME, @n INT, @m INT, @i INT, @x VARBINARY(MAX);
WHILE 1 = 1
BEGIN
    BEGIN TRANSACTION;
    WAITFOR (RECEIVE TOP (1) @h = conversation_handle, @t = message_type_name FROM TQ),
        TIMEOUT 100;
    IF @@ROWCOUNT = 0 BEGIN ROLLBACK; RETURN 0 END
    IF @t = N'DEFAULT'
    BEGIN
        SELECT @n = 0, @i = 0;
        WHILE @i < 200
        BEGIN
            SELECT @n = COUNT(*) FROM sys.dm_broker_conversation_group_locks
                WHERE queue_name = N'TQ';
            SELECT @m = COUNT(*) FROM sys.queue_messages WHERE queue_name = N'TQ';
            IF @n >= 2 OR @m < 2 BREAK;
            WAITFOR (RECEIVE TOP (1) @x = message_body FROM Idle), TIMEOUT 50;
            SET @i = @i + 1;
        END
        SEND ON CONVERSATION @h (CAST(@n AS NVARCHAR(10)));
    END
    ELSE END CONVERSATION @h;
    COMMIT;
END
"""


def test_c7_two_procedure_readers_hold_their_groups_in_transactions_at_once():
    """MAX_QUEUE_READERS 2, T-SQL: a reader sees two groups locked while it holds its own
    (the first to see it commits, so the other may see its own alone again); run one at a
    time, each would see one."""
    with pybroker.connect(None) as inst:
        db = inst.create_database("Act")
        db.execute(SIDE_BY_SIDE)
        db.execute("CREATE QUEUE Idle; CREATE QUEUE IQ; CREATE SERVICE I ON QUEUE IQ;\n"
                   "CREATE QUEUE TQ WITH ACTIVATION (STATUS = ON, PROCEDURE_NAME = Together,"
                   " MAX_QUEUE_READERS = 2, EXECUTE AS SELF); "
                   "CREATE SERVICE T ON QUEUE TQ ([DEFAULT])")
        inst.start_activation(check_interval=0.05)
        asked = [_ask(db), _ask(db)]  # two conversations: two groups
        answers = [db.receive("IQ", timeout=30) for _ in asked]
        seen = sorted(m.message_body for [m] in answers)
        assert seen in ([b"1", b"2"], [b"2", b"2"])
        assert {m.conversation_handle for [m] in answers} == {c.handle for c in asked}


def test_a_procedure_that_rolls_back_five_times_turns_its_queue_off():
    with pybroker.connect(None) as inst:
        db = inst.create_database("Act")
        db.execute("CREATE PROCEDURE Refuse AS\nWHILE 1 = 1 BEGIN BEGIN TRAN; "
                   "RECEIVE TOP (1) * FROM TQ; IF @@ROWCOUNT = 0 BEGIN ROLLBACK; BREAK END "
                   "ROLLBACK END")
        db.execute("CREATE QUEUE IQ; CREATE SERVICE I ON QUEUE IQ; CREATE QUEUE TQ WITH "
                   "ACTIVATION (STATUS = ON, PROCEDURE_NAME = Refuse, MAX_QUEUE_READERS = 1); "
                   "CREATE SERVICE T ON QUEUE TQ ([DEFAULT])")
        inst.start_activation(check_interval=0.05)
        _ask(db)
        wait_for(lambda: not next(q for q in db.queues() if q.name == "TQ").status,
                 what="poison-message handling to turn TQ off")


# -- TRY ... CATCH, THROW, RAISERROR ----------------------------------------------------------


@pytest.fixture(scope="module")
def db():
    yield from program_database("Prog")


ERRORS = "PRINT CONCAT_ERRORS"  # replaced below by the PRINT of every ERROR_ function
_ALL = ("PRINT CAST(ERROR_NUMBER() AS NVARCHAR(20)) + N'|' + ERROR_MESSAGE() + N'|' + "
        "CAST(ERROR_SEVERITY() AS NVARCHAR(5)) + N'|' + CAST(ERROR_STATE() AS NVARCHAR(5)) + "
        "N'|' + CAST(ERROR_LINE() AS NVARCHAR(5)) + N'|' + ISNULL(ERROR_PROCEDURE(), N'-')")


@pytest.mark.parametrize(("text", "lines"), [
    ("BEGIN TRY\n  PRINT 'a';\n  THROW 50001, N'no stock', 3;\n  PRINT 'b'\nEND TRY\n"
     f"BEGIN CATCH\n  {ERRORS}\nEND CATCH\nPRINT 'after'",
     ["a", "50001|no stock|16|3|3|-", "after"]),
    ("BEGIN TRY RAISERROR(N'crate %d of %s', 16, 2, 7, N'ten') END TRY\n"
     f"BEGIN CATCH {ERRORS} END CATCH", ["50000|crate 7 of ten|16|2|1|-"]),
    ("RAISERROR(N'just saying %s', 10, 1, N'hello'); PRINT 'went on'",
     ["just saying hello", "went on"]),
    ("BEGIN TRY SEND ON CONVERSATION NEWID() (N'x') END TRY\n"
     "BEGIN CATCH PRINT ERROR_NUMBER(); PRINT @@ERROR; PRINT @@ERROR END CATCH",
     ["8426", "0", "0"]),
    ("BEGIN TRY PRINT 1 END TRY BEGIN CATCH PRINT 'never' END CATCH; PRINT ERROR_NUMBER()",
     ["1", ""]),
    ("BEGIN TRY BEGIN TRY THROW 50002, N'inner', 1 END TRY BEGIN CATCH PRINT 'caught'; "
     "THROW END CATCH END TRY BEGIN CATCH PRINT ERROR_MESSAGE() + N' again' END CATCH",
     ["caught", "inner again"]),
    ("BEGIN TRY BEGIN TRY THROW 50003, N'first', 1 END TRY BEGIN CATCH BEGIN TRY "
     "THROW 50004, N'second', 1 END TRY BEGIN CATCH PRINT ERROR_MESSAGE() END CATCH; "
     "PRINT ERROR_MESSAGE() END CATCH END TRY BEGIN CATCH PRINT 'no' END CATCH",
     ["second", "first"]),
    ("PRINT XACT_STATE(); BEGIN TRAN; PRINT XACT_STATE();\nBEGIN TRY THROW 50005, N'x', 1 "
     "END TRY BEGIN CATCH PRINT XACT_STATE(); PRINT @@TRANCOUNT; IF XACT_STATE() <> 0 "
     "ROLLBACK; PRINT @@TRANCOUNT END CATCH", ["0", "1", "-1", "1", "0"]),
    ("DECLARE @i INT = 0; WHILE @i < 3 BEGIN SET @i = @i + 1; BEGIN TRY IF @i = 2 THROW "
     "50006, N'skip', 1; PRINT @i END TRY BEGIN CATCH CONTINUE END CATCH END",
     ["1", "3"]),
])  # fmt: skip
def test_each_error_construct_does_what_sql_server_does(db, text, lines):
    assert printed(db, text.replace(ERRORS, _ALL)) == lines


def test_an_uncaught_throw_stops_the_batch_with_its_number(db):
    with pytest.raises(TsqlError, match="THROW at line 2, column 1 failed: out of crates") as e:
        db.execute("PRINT 'a'\nTHROW 51000, N'out of crates', 4")
    assert (e.value.number, e.value.severity, e.value.state) == (51000, 16, 4)
    assert e.value.results.messages == ["a"]


def test_an_uncommittable_transaction_refuses_work_until_rolled_back(db):
    text = ("BEGIN TRAN; BEGIN TRY THROW 50007, N'x', 1 END TRY BEGIN CATCH PRINT 'c' END "
            "CATCH\nDECLARE @h UNIQUEIDENTIFIER; BEGIN DIALOG @h FROM SERVICE S TO SERVICE 'T'")
    before = db.instance.sql("SELECT count(*) FROM sys.conversation_endpoints").fetchone()
    with pytest.raises(TsqlError, match="the current transaction cannot be committed") as e:
        db.execute(text)
    assert e.value.number == 3930
    assert db.instance.sql("SELECT count(*) FROM sys.conversation_endpoints").fetchone() == (
        before)


def test_a_rolled_back_catch_leaves_nothing_of_the_try(db):
    text = ("DECLARE @h UNIQUEIDENTIFIER; BEGIN TRY BEGIN TRAN; BEGIN DIALOG @h FROM SERVICE S "
            "TO SERVICE 'T'; SEND ON CONVERSATION NEWID() (N'x'); COMMIT END TRY BEGIN CATCH "
            "ROLLBACK TRANSACTION; PRINT ERROR_NUMBER() END CATCH")
    before = db.instance.sql("SELECT count(*) FROM sys.conversation_endpoints").fetchone()
    assert printed(db, text) == ["8426"]
    assert db.instance.sql("SELECT count(*) FROM sys.conversation_endpoints").fetchone() == (
        before)


# -- stored procedures ----------------------------------------------------------------------


def test_procedures_take_arguments_return_codes_and_output(db):
    db.execute("CREATE PROCEDURE dbo.Stock @item NVARCHAR(20), @count INT = 5,\n"
               "    @note NVARCHAR(40) = NULL OUTPUT\nAS\nBEGIN\n"
               "  SET @note = @item + N' x ' + CAST(@count AS NVARCHAR(10));\n"
               "  PRINT @note;\n  RETURN @count * 2\nEND")
    results = db.execute(
        "DECLARE @rc INT, @n NVARCHAR(40);\nEXEC @rc = Stock N'crate';\n"
        "EXECUTE @rc = dbo.Stock @count = 3, @item = N'box', @note = @n OUTPUT;\n"
        "PRINT @n; PRINT @rc;\nEXEC [Prog].[dbo].[Stock] N'tin', DEFAULT, @n OUT; PRINT @n")
    assert results.messages == ["crate x 5", "box x 3", "box x 3", "6", "tin x 5", "tin x 5"]
    db.execute("ALTER PROCEDURE Stock @item NVARCHAR(20) AS PRINT N'altered ' + @item")
    assert printed(db, "EXEC Stock 'a'") == ["altered a"]
    db.execute("CREATE OR ALTER PROCEDURE Stock AS SELECT 1 AS one")
    assert [r.rows for r in db.execute("EXEC Stock")] == [[(1,)]]
    rows = db.instance.sql("SELECT p.schema_name, p.name, m.definition FROM sys.procedures "
                           "AS p JOIN sys.sql_modules AS m USING (object_id) "
                           "WHERE p.name = 'Stock'").fetchall()
    assert rows == [("dbo", "Stock", "CREATE OR ALTER PROCEDURE Stock AS SELECT 1 AS one")]
    db.execute("DROP PROCEDURE Stock; DROP PROCEDURE IF EXISTS Stock")
    assert [p.name for p in db.procedures()] == []


def test_a_procedure_calls_a_procedure_in_the_callers_transaction(db):
    db.execute("CREATE PROCEDURE Inner1 @h UNIQUEIDENTIFIER AS SEND ON CONVERSATION @h "
               "(N'from inside'); PRINT @@TRANCOUNT")
    db.execute("CREATE PROCEDURE Outer1 AS DECLARE @h UNIQUEIDENTIFIER; BEGIN TRAN; BEGIN "
               "DIALOG @h FROM SERVICE S TO SERVICE 'T'; EXEC Inner1 @h; ROLLBACK")
    before = db.instance.sql("SELECT count(*) FROM sys.conversation_endpoints").fetchone()
    assert printed(db, "EXEC Outer1") == ["1"]
    assert db.instance.sql("SELECT count(*) FROM sys.conversation_endpoints").fetchone() == (
        before)


def test_a_runtime_error_names_the_procedure_and_its_line(db):
    db.execute("CREATE PROCEDURE Fails AS\nPRINT 'one'\nSEND ON CONVERSATION NEWID() (N'x')")
    with pytest.raises(ConversationError) as caught:
        db.execute("PRINT 'start'\nEXEC Fails")
    assert str(caught.value).startswith(
        "Msg 8426, Level 16, State 1, Procedure dbo.Fails, Line 3: SEND at line 3, column 1 "
        "failed: conversation handle ")
    assert caught.value.results.messages == ["start", "one"]
    text = (f"BEGIN TRY EXEC Fails END TRY BEGIN CATCH {_ALL} END CATCH")
    [line] = [m for m in printed(db, text) if m != "one"]
    assert re.fullmatch(r"8426\|conversation handle .*\|16\|1\|3\|dbo\.Fails", line)


@pytest.mark.parametrize(("call_text", "number", "message"), [
    ("EXEC Nowhere", 2812, "could not find stored procedure 'Nowhere'"),
    ("EXEC Other.dbo.Two 1", 2812, "names database Other"),
    ("EXEC Two", 201, "expects parameter @a, which was not supplied"),
    ("EXEC Two 1, 2, 3", 8144, "has too many arguments specified"),
    ("EXEC Two @c = 1", 8145, "@c is not a parameter for procedure dbo.Two"),
    ("DECLARE @v INT; EXEC Two @a = @v OUTPUT", 8162, "was not declared as an OUTPUT"),
    ("EXEC Two 1, @a = 2", 8143, "specified more than once"),
    ("EXEC Deep 1", 217, "maximum stored procedure nesting level exceeded (limit 32)"),
])  # fmt: skip
def test_a_bad_call_is_sql_servers_error(db, call_text, number, message):
    db.execute("CREATE OR ALTER PROCEDURE Two @a INT, @b INT = 0 AS PRINT @a + @b")
    db.execute("CREATE OR ALTER PROCEDURE Deep @n INT AS DECLARE @m INT = @n + 1; EXEC Deep @m")
    with pytest.raises(TsqlError, match=re.escape(message)) as caught:
        db.execute(call_text)
    assert caught.value.number == number


def test_procedure_ddl_joins_the_transaction_around_it(db):
    db.execute("CREATE PROCEDURE [Odd.Name]]x] AS PRINT 'kept'")
    assert printed(db, "BEGIN TRAN; DROP PROCEDURE [Odd.Name]]x]; ROLLBACK;\n"
                       "EXEC dbo.[odd.name]]x]") == ["kept"]
    db.execute("DROP PROCEDURE [Odd.Name]]x]")


def test_procedures_are_kept_in_the_instance_file(tmp_path):
    with pybroker.connect(tmp_path / "p.duckdb", worker=False) as inst:
        inst.create_database("D").execute("CREATE PROCEDURE Hello AS PRINT 'hello'")
    with pybroker.connect(tmp_path / "p.duckdb", worker=False) as inst:
        assert printed(inst.database("D"), "EXEC hello") == ["hello"]  # any case


@pytest.mark.parametrize(("text", "error", "message"), [
    ("PRINT 1\nCREATE PROCEDURE P AS PRINT 1", TsqlSyntaxError,
     "CREATE PROCEDURE at line 2, column 1 is not the first statement of its batch"),
    ("CREATE PROCEDURE P AS\nPRINT 1\nIF 1 = 1 BREAK", TsqlSyntaxError,
     "BREAK at line 3, column 10 is outside a WHILE loop"),
    ("CREATE PROCEDURE P AS", TsqlSyntaxError, "expected the body of procedure P after AS"),
    ("CREATE PROCEDURE P @a INT, @a INT AS PRINT 1", TsqlSyntaxError,
     "the parameter @a at line 1, column 28 is named twice"),
    ("CREATE PROCEDURE P @a INT = 1 + 1 AS PRINT 1", TsqlSyntaxError,
     "the default of @a at line 1, column 29 is not a constant"),
    ("CREATE PROCEDURE P WITH RECOMPILE AS PRINT 1", TsqlSyntaxError,
     "expected EXECUTE AS after WITH"),
    ("CREATE PROCEDURE P AS PRINT @nope", TsqlSyntaxError, "the variable @nope at line 1, "
     "column 29 is not declared"),
    ("CREATE PROCEDURE P AS CREATE PROCEDURE Q AS PRINT 1", TsqlSyntaxError,
     "CREATE PROCEDURE at line 1, column 23 is inside a procedure's body"),
    ("RETURN 1", TsqlSyntaxError, "RETURN with a value is for stored procedures"),
    ("THROW", TsqlSyntaxError, "THROW at line 1, column 1 has no arguments outside a CATCH"),
    ("BEGIN TRY PRINT 1 END TRY PRINT 2", TsqlSyntaxError,
     "expected BEGIN CATCH right after the END TRY of the BEGIN TRY at line 1, column 1"),
    ("BEGIN TRY END TRY BEGIN CATCH END CATCH", TsqlSyntaxError,
     "expected a statement inside the BEGIN TRY ... END TRY at line 1, column 1"),
    ("BEGIN TRY PRINT 1 END CATCH", TsqlSyntaxError, "expected END TRY to close the BEGIN TRY"),
    ("BEGIN CATCH PRINT 1 END CATCH", TsqlSyntaxError, "BEGIN CATCH at line 1, column 1 "
     "follows no END TRY"),
    ("RAISERROR('x', 16)", TsqlSyntaxError, "expected ',' and the state after RAISERROR's "
     "severity but found ')' at line 1, column 18"),
    ("RAISERROR('x', 16, 1) WITH SHOUT", TsqlSyntaxError, "expected LOG, NOWAIT or SETERROR"),
    ("EXEC P 1, @a = 2, 3", TsqlSyntaxError, "the argument at line 1, column 19 is passed by "
     "position after one passed by name"),
    ("EXEC P 1 + 1", TsqlSyntaxError, "the argument at line 1, column 8 is an expression"),
    ("EXEC P 1 OUTPUT", TsqlSyntaxError, "OUTPUT at line 1, column 10 follows no @variable"),
    ("EXEC (N'PRINT 1') AT Elsewhere", UnsupportedStatementError,
     "EXEC (...) AT at line 1, column 19 is not supported"),
])  # fmt: skip
def test_bad_input_is_refused_with_its_line_and_column(db, text, error, message):
    with pytest.raises(error, match=re.escape(message)):
        db.execute(text)


@pytest.mark.parametrize(("text", "number", "message"), [
    ("THROW 49999, N'x', 1", None, "THROW's error number"),
    ("THROW 50000, N'x', 256", None, "THROW's state"),
    ("RAISERROR(N'x', 19, 1)", None, "RAISERROR's severity"),
    ("RAISERROR(50001, 16, 1)", 18054, "there is no sys.messages"),
])  # fmt: skip
def test_bad_values_are_refused_when_the_statement_runs(db, text, number, message):
    with pytest.raises(pybroker.BrokerError, match=re.escape(message)) as caught:
        db.execute(text)
    assert getattr(caught.value, "number", None) == number


def test_a_refused_batch_changes_nothing(db):
    before = db.procedures(), db.queues()
    with pytest.raises(TsqlSyntaxError, match="at line 5, column 4"):
        db.execute("CREATE QUEUE Qrefused\nGO\nCREATE PROCEDURE Refused AS\nPRINT 1\nEND")
    assert (db.procedures(), db.queues()) == before
    with pytest.raises(pybroker.AlreadyExistsError, match=r"already an object named dbo\.Kept"):
        db.execute("CREATE PROCEDURE Kept AS PRINT 1\nGO\nCREATE PROCEDURE kept AS PRINT 2")
    assert printed(db, "EXEC Kept") == ["1"]
    with pytest.raises(pybroker.NotFoundError, match=r"procedure dbo\.Missing does not exist"):
        db.execute("ALTER PROCEDURE Missing AS PRINT 1")
    db.execute("DROP PROCEDURE Kept")


# -- generated programs of TRY, CATCH and THROW against a reference evaluator ----------------


class _Thrown(Exception):
    def __init__(self, number: int) -> None:
        super().__init__(number)
        self.number = number


def _statement(depth: int, catching: bool) -> st.SearchStrategy:
    leaves = [st.tuples(st.just("print"), st.integers(0, 9)),
              st.tuples(st.just("note"), st.integers(0, 9)),
              st.tuples(st.just("throw"), st.integers(50001, 50009)),
              st.tuples(st.just("errnum"))]
    if catching:
        leaves.append(st.tuples(st.just("rethrow")))
    if depth <= 0:
        return st.one_of(leaves)
    nested = st.tuples(st.just("try"), _block(depth - 1, catching, 1),
                       _block(depth - 1, True, 0))
    return st.one_of(*leaves, nested)


def _block(depth: int, catching: bool, fewest: int) -> st.SearchStrategy:
    return st.lists(st.deferred(lambda: _statement(depth, catching)), min_size=fewest,
                    max_size=3).map(tuple)


def _render(block: tuple) -> str:
    return "; ".join(_render_one(s) for s in block)


def _render_one(s: tuple) -> str:
    kind = s[0]
    if kind == "print":
        return f"PRINT {s[1]}"
    if kind == "note":
        return f"RAISERROR(N'note %d', 10, 1, {s[1]})"
    if kind == "throw":
        return f"THROW {s[1]}, N'e{s[1]}', 1"
    if kind == "errnum":
        return "PRINT ERROR_NUMBER()"
    if kind == "rethrow":
        return "THROW"
    return f"BEGIN TRY {_render(s[1])} END TRY BEGIN CATCH {_render(s[2])} END CATCH"


def _reference(block: tuple, handling: _Thrown | None, out: list[str]) -> None:
    """What SQL Server prints: the ERROR_ functions tell of the innermost CATCH's error."""
    for s in block:
        kind = s[0]
        if kind == "print":
            out.append(str(s[1]))
        elif kind == "note":
            out.append(f"note {s[1]}")
        elif kind == "throw":
            raise _Thrown(s[1])
        elif kind == "errnum":
            out.append("" if handling is None else str(handling.number))
        elif kind == "rethrow":
            assert handling is not None
            raise handling
        else:
            try:
                _reference(s[1], handling, out)
            except _Thrown as exc:
                _reference(s[2], exc, out)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(program=_block(2, False, 1))
def test_generated_try_catch_programs_print_what_the_reference_prints(db, program):
    expected: list[str] = []
    try:
        _reference(program, None, expected)
        number = None
    except _Thrown as exc:
        number = exc.number
    try:
        messages = db.execute(_render(program)).messages
        got = None
    except TsqlError as exc:
        messages, got = exc.results.messages, exc.number
    assert (messages, got) == (expected, number)
