"""Control flow in a T-SQL batch (``Database.execute()``, ``pybroker sql``): BEGIN ... END,
IF ... ELSE on conditions, WHILE with BREAK and CONTINUE, RETURN, PRINT, SET NOCOUNT and
the system variables scripts read. The proof is a conversation in a single database written
in the shape of SQL Server's first Service Broker tutorial, run unchanged by the command a
user runs and by the API; then each construct, the refusals (with line and column), a
refused batch that changes nothing, and generated programs checked against a small
reference evaluator written here."""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pybroker
from pybroker import TsqlSyntaxError
from pybroker.core.tsql.batches import parse_batches
from pybroker.errors import InvalidArgumentError, TransactionError
from tests.cli_helpers import run
from tests.tsql_helpers import printed, program_database

END_DIALOG = "http://schemas.microsoft.com/SQL/ServiceBroker/EndDialog"

# A request and its reply in one database, step by step as the tutorial takes them: the
# objects; the initiator begins a dialog and sends the request in a transaction; the target
# receives it into variables and, when it is the request, replies and ends its side; the
# initiator reads its queue until the end of the dialog arrives, and ends its side.
TUTORIAL = """
-- the objects of the conversation
CREATE MESSAGE TYPE [//Shelf/Lookup/Ask] VALIDATION = WELL_FORMED_XML;
CREATE MESSAGE TYPE [//Shelf/Lookup/Answer] VALIDATION = WELL_FORMED_XML;
CREATE CONTRACT [//Shelf/Lookup/Contract]
    ([//Shelf/Lookup/Ask] SENT BY INITIATOR, [//Shelf/Lookup/Answer] SENT BY TARGET);
CREATE QUEUE LookupTargetQueue;
CREATE SERVICE [//Shelf/Lookup/TargetService] ON QUEUE LookupTargetQueue
    ([//Shelf/Lookup/Contract]);
CREATE QUEUE LookupInitiatorQueue;
CREATE SERVICE [//Shelf/Lookup/InitiatorService] ON QUEUE LookupInitiatorQueue;
GO

-- the initiator asks
DECLARE @DialogHandle UNIQUEIDENTIFIER;
DECLARE @AskBody NVARCHAR(100);
BEGIN TRANSACTION;
BEGIN DIALOG @DialogHandle
    FROM SERVICE [//Shelf/Lookup/InitiatorService]
    TO SERVICE N'//Shelf/Lookup/TargetService'
    ON CONTRACT [//Shelf/Lookup/Contract]
    WITH ENCRYPTION = OFF;
SELECT @AskBody = N'<Ask>where is the atlas?</Ask>';
SEND ON CONVERSATION @DialogHandle MESSAGE TYPE [//Shelf/Lookup/Ask] (@AskBody);
PRINT N'asked: ' + @AskBody;
COMMIT TRANSACTION;
GO

-- the target answers
DECLARE @TargetHandle UNIQUEIDENTIFIER;
DECLARE @TargetBody NVARCHAR(100);
DECLARE @TargetType SYSNAME;
BEGIN TRANSACTION;
WAITFOR
( RECEIVE TOP (1)
    @TargetHandle = conversation_handle,
    @TargetBody = message_body,
    @TargetType = message_type_name
  FROM LookupTargetQueue
), TIMEOUT 5000;
PRINT N'received: ' + @TargetBody;
IF @TargetType = N'//Shelf/Lookup/Ask'
BEGIN
    DECLARE @AnswerBody NVARCHAR(100);
    SELECT @AnswerBody = N'<Answer>third shelf</Answer>';
    SEND ON CONVERSATION @TargetHandle MESSAGE TYPE [//Shelf/Lookup/Answer] (@AnswerBody);
    END CONVERSATION @TargetHandle;
    PRINT N'answered: ' + @AnswerBody;
END
COMMIT TRANSACTION;
GO

-- the initiator reads the answer, then the end of the dialog
SET NOCOUNT ON;
DECLARE @InitHandle UNIQUEIDENTIFIER, @InitBody NVARCHAR(100), @InitType SYSNAME;
DECLARE @Finished BIT = 0;
WHILE @Finished = 0
BEGIN
    BEGIN TRANSACTION;
    WAITFOR
    ( RECEIVE TOP (1)
        @InitHandle = conversation_handle,
        @InitBody = message_body,
        @InitType = message_type_name
      FROM LookupInitiatorQueue
    ), TIMEOUT 5000;
    IF @@ROWCOUNT = 0
    BEGIN
        ROLLBACK TRANSACTION;
        PRINT N'nothing more arrived';
        BREAK;
    END
    IF @InitType = N'//Shelf/Lookup/Answer'
        PRINT N'the answer: ' + @InitBody;
    ELSE IF @InitType = N'http://schemas.microsoft.com/SQL/ServiceBroker/EndDialog'
    BEGIN
        END CONVERSATION @InitHandle;
        SET @Finished = 1;
        PRINT N'the dialog ended';
    END
    COMMIT TRANSACTION;
END
SELECT @Finished AS finished, @@TRANCOUNT AS open_transactions;
"""
TUTORIAL_PRINTED = [
    "asked: <Ask>where is the atlas?</Ask>",
    "received: <Ask>where is the atlas?</Ask>",
    "answered: <Answer>third shelf</Answer>",
    "the answer: <Answer>third shelf</Answer>",
    "the dialog ended",
]


def _completed(inst: pybroker.Instance) -> None:
    """Both endpoints CLOSED, no message waits in a queue or to leave."""
    states = inst.sql("SELECT service_name, state_desc FROM sys.conversation_endpoints "
                      "ORDER BY service_name").fetchall()
    assert states == [("//Shelf/Lookup/InitiatorService", "CLOSED"),
                      ("//Shelf/Lookup/TargetService", "CLOSED")]
    assert inst.sql("SELECT COUNT(*) FROM sys.transmission_queue").fetchone() == (0,)
    assert inst.sql("SELECT COUNT(*) FROM queue_messages").fetchone() == (0,)


def test_the_tutorial_conversation_completes_through_execute():
    with pybroker.connect(None, worker=False) as inst:
        results = inst.create_database("Library").execute(TUTORIAL)
        assert results.messages == TUTORIAL_PRINTED
        assert [r.rows for r in results] == [[(1, 0)]]
        _completed(inst)


def test_the_tutorial_conversation_completes_through_pybroker_sql(tmp_path):
    path = tmp_path / "library.duckdb"
    done = run("create-database", path, "Library")
    assert done.returncode == 0, done.stderr
    done = run("sql", path, "-d", "Library", "-", stdin=TUTORIAL)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == TUTORIAL_PRINTED  # PRINT writes to stderr
    assert done.stdout.split() == ["finished", "open_transactions", "--------",
                                   "-----------------", "1", "0", "(1", "row)"]
    with pybroker.connect(path, worker=False) as inst:
        _completed(inst)


# -- each construct ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def db():
    yield from program_database("Flow")


@pytest.mark.parametrize(
    ("text", "lines"),
    [
        ("IF 1 = 1 PRINT 'yes' ELSE PRINT 'no'", ["yes"]),
        ("IF 1 = 2 PRINT 'yes' ELSE PRINT 'no'", ["no"]),
        ("IF 1 = 2 PRINT 'yes'; PRINT 'after'", ["after"]),
        ("IF 1 = 1 PRINT 'a'; ELSE PRINT 'b'", ["a"]),  # a ';' may come before ELSE
        ("IF 1 = 2 PRINT 'a' ELSE IF 2 = 2 PRINT 'b' ELSE PRINT 'c'", ["b"]),
        ("IF 1 = 1 BEGIN PRINT 'a'; PRINT 'b' END ELSE BEGIN PRINT 'c' END", ["a", "b"]),
        ("BEGIN BEGIN PRINT 'nested' END END", ["nested"]),
        ("IF NULL = NULL PRINT 'equal' ELSE PRINT 'unknown'", ["unknown"]),
        ("IF NOT (NULL = 1) PRINT 'true' ELSE PRINT 'unknown'", ["unknown"]),
        ("IF NULL IS NULL AND 1 IS NOT NULL PRINT 'ok'", ["ok"]),
        ("IF 1 = 2 OR 2 = 2 AND 3 = 3 PRINT 'and binds first'", ["and binds first"]),
        ("IF (1 = 2 OR 2 = 2) AND 3 = 4 PRINT 'x' ELSE PRINT 'parens'", ["parens"]),
        ("IF (1 + 2) * 3 = 9 PRINT 'a value in parentheses'", ["a value in parentheses"]),
        ("IF 1 <> 2 AND 1 != 2 AND 1 < 2 AND 2 > 1 AND 1 <= 1 AND 1 >= 1 PRINT 'all'",
         ["all"]),
        ("IF N'Abc' = N'aBC  ' PRINT 'case and trailing spaces do not count'",
         ["case and trailing spaces do not count"]),
        ("IF N'a' < N'B' PRINT 'ordered without case'", ["ordered without case"]),
        ("IF 10 = N'10' PRINT 'text converts to a number'", ["text converts to a number"]),
        ("IF 3 IN (1, 2, 3) AND 4 NOT IN (1, 2) PRINT 'in'", ["in"]),
        ("IF 3 NOT IN (1, NULL) PRINT 'x' ELSE PRINT 'unknown'", ["unknown"]),
        ("IF N'//Shop/Order' LIKE N'//Shop/%' AND N'abc' LIKE N'a_c' AND N'b' LIKE '[a-c]' "
         "AND N'd' NOT LIKE '[^d]' PRINT 'like'", ["like"]),
        ("IF N'ABC' LIKE N'a%' PRINT 'like ignores case'", ["like ignores case"]),
        ("DECLARE @i INT = 0; WHILE @i < 3 BEGIN SET @i = @i + 1; PRINT @i END",
         ["1", "2", "3"]),
        ("DECLARE @i INT = 0; WHILE 1 = 1 BEGIN SET @i = @i + 1; IF @i = 3 BREAK; "
         "IF @i = 1 CONTINUE; PRINT @i END PRINT 'done'", ["2", "done"]),
        ("DECLARE @i INT = 0, @j INT; WHILE @i < 2 BEGIN SET @i = @i + 1; SET @j = 0; "
         "WHILE @j < 5 BEGIN SET @j = @j + 1; IF @j > 2 BREAK; PRINT CAST(@i AS "
         "NVARCHAR(9)) + N'.' + CAST(@j AS NVARCHAR(9)) END END",
         ["1.1", "1.2", "2.1", "2.2"]),  # BREAK leaves the innermost loop only
        ("DECLARE @i INT = 0; WHILE NULL = NULL SET @i = 1; PRINT @i", ["0"]),
        ("PRINT 'a'; RETURN; PRINT 'b'", ["a"]),
        ("DECLARE @i INT = 0; WHILE @i < 9 BEGIN SET @i = @i + 1; IF @i = 2 RETURN; "
         "PRINT @i END PRINT 'not reached'", ["1"]),
        # A variable exists for the whole batch; DECLARE without a value does not reset it.
        ("DECLARE @i INT = 0; WHILE @i < 2 BEGIN DECLARE @n INT; SET @n = ISNULL(@n, 0) + 1; "
         "SET @i = @i + 1 END PRINT @n", ["2"]),
        ("IF 1 = 2 BEGIN DECLARE @never NVARCHAR(5) = N'x' END PRINT ISNULL(@never, 'null')",
         ["null"]),
        ("PRINT NULL; PRINT 0x41; PRINT N'é'", ["", "A", "é"]),
        ("PRINT 7 / 2; PRINT -7 / 2; PRINT -7 % 3; PRINT 2 + 3 * 4", ["3", "-3", "-1", "14"]),
        ("PRINT LEN(N'ab  '); PRINT LEN(NULL); PRINT LEN(0x0102)", ["2", "", "2"]),
        ("PRINT COALESCE(NULL, NULL, N'third'); PRINT ISNULL(NULL, 5)", ["third", "5"]),
        ("IF LEN(CAST(NEWID() AS NVARCHAR(36))) = 36 AND "
         "CONVERT(NVARCHAR(30), GETDATE(), 121) LIKE '2%' PRINT 'ok'",
         ["ok"]),
        ("SET NOCOUNT ON; SET NOCOUNT OFF; SET XACT_ABORT ON; PRINT 'options'", ["options"]),
        ("PRINT @@TRANCOUNT; BEGIN TRAN; BEGIN TRAN; PRINT @@TRANCOUNT; COMMIT; "
         "PRINT @@TRANCOUNT; COMMIT; PRINT @@TRANCOUNT", ["0", "2", "1", "0"]),
        ("DECLARE @n INT; SET @n = 1; PRINT @@ROWCOUNT; PRINT @@ROWCOUNT; SELECT 1 AS a; "
         "PRINT @@ROWCOUNT; PRINT @@ERROR", ["1", "0", "1", "0"]),
        ("DECLARE @h UNIQUEIDENTIFIER; RECEIVE TOP (1) @h = conversation_handle FROM Q; "
         "PRINT @@ROWCOUNT; IF @h IS NULL PRINT 'nothing received'",
         ["0", "nothing received"]),
    ],
)
def test_each_construct_does_what_sql_server_does(db, text, lines):
    assert printed(db, text) == lines


def test_rowcount_counts_what_receive_returned(db):
    lines = printed(db, """
        DECLARE @h UNIQUEIDENTIFIER, @n INT = 0;
        BEGIN DIALOG @h FROM SERVICE S TO SERVICE 'T' WITH ENCRYPTION = OFF;
        WHILE @n < 3 BEGIN SEND ON CONVERSATION @h (N'm'); SET @n = @n + 1 END
        DECLARE @t TABLE (b VARBINARY(MAX));
        RECEIVE message_body FROM Q INTO @t;
        PRINT @@ROWCOUNT;
        SELECT * FROM @t;
        PRINT @@ROWCOUNT;
        END CONVERSATION @h WITH CLEANUP;
        RECEIVE * FROM Q;
        PRINT @@ROWCOUNT""")
    assert lines == ["3", "3", "0"]


def test_printed_lines_and_result_sets_cross_go_in_order(db):
    results = db.execute("PRINT 'one'; SELECT 1 AS a\nGO\nPRINT 'two'; SELECT 2 AS a\n")
    assert results.messages == ["one", "two"]
    assert [r.rows for r in results] == [[(1,)], [(2,)]]


def test_a_failure_inside_a_block_names_the_statement_and_keeps_what_was_printed(db):
    with pytest.raises(InvalidArgumentError) as caught:
        db.execute("DECLARE @i INT = 0;\nWHILE @i < 5\nBEGIN\n  SET @i = @i + 1;\n"
                   "  PRINT @i;\n  IF @i = 2 SET @i = @i / 0\nEND")
    assert ("SET at line 6, column 13 failed: Divide by zero error encountered (divide by zero "
            "at line 6, column 25)") in str(caught.value)
    assert caught.value.number == 8134
    assert caught.value.results.messages == ["1", "2"]


def test_a_condition_that_fails_names_the_if(db):
    with pytest.raises(InvalidArgumentError, match=r"IF at line 1, column 1 failed: "
                       r"Conversion failed when converting the nvarchar value 'x' to data "
                       r"type bigint \(conversion failed at line 1, column 9\)"):
        db.execute("IF N'x' = 1 PRINT 'no'")


def test_a_failure_in_a_loop_rolls_back_its_transaction(db):
    before = db.queues()
    with pytest.raises(InvalidArgumentError, match="the open transaction was rolled back"):
        db.execute("DECLARE @i INT = 0; BEGIN TRAN; WHILE @i < 3 BEGIN SET @i = @i + 1; "
                   "IF @i = 2 CREATE QUEUE Qloop; IF @i = 3 SET @i = N'x' END COMMIT")
    assert db.queues() == before


def test_return_inside_a_transaction_ends_the_batch_and_rolls_back(db):
    before = db.queues()
    with pytest.raises(TransactionError, match="ended inside the transaction"):
        db.execute("BEGIN TRAN; CREATE QUEUE Qreturn; IF 1 = 1 RETURN; COMMIT")
    assert db.queues() == before


# -- refusals ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "error", "message"),
    [
        ("IF 1 = 1", TsqlSyntaxError, "expected a statement (or BEGIN ... END) for the IF at "
         "line 1, column 1 but found the end of the batch at line 1, column 9"),
        ("IF 1 PRINT 'x'", TsqlSyntaxError, "expected a comparison (=, <>, !=, <, >, <=, >=), "
         "IS [NOT] NULL, [NOT] IN (...) or [NOT] LIKE but found 'PRINT' at line 1, column 6"),
        ("IF 1 = 1 PRINT 'a' ELSE", TsqlSyntaxError, "for the ELSE at line 1, column 20"),
        ("PRINT 'a'\nELSE PRINT 'b'", TsqlSyntaxError,
         "ELSE at line 2, column 1 follows no IF"),
        ("BEGIN PRINT 'a'", TsqlSyntaxError,
         "expected END to close the BEGIN at line 1, column 1"),
        ("BEGIN END", TsqlSyntaxError,
         "expected a statement inside the BEGIN ... END at line 1, column 1"),
        ("PRINT 'a' END", TsqlSyntaxError, "expected CONVERSATION after END"),
        ("BREAK", TsqlSyntaxError, "BREAK at line 1, column 1 is outside a WHILE loop"),
        ("IF 1 = 1 CONTINUE", TsqlSyntaxError,
         "CONTINUE at line 1, column 10 is outside a WHILE loop"),
        ("WHILE 1 = 1 PRINT 'x'; BREAK", TsqlSyntaxError,
         "BREAK at line 1, column 24 is outside a WHILE loop"),
        ("RETURN 1", TsqlSyntaxError, "RETURN with a value is for stored procedures"),
        ("IF @x = 1 PRINT 'x'", TsqlSyntaxError,
         "the variable @x at line 1, column 4 is not declared"),
        ("IF EXISTS (SELECT foo(1)) PRINT 'x'", TsqlSyntaxError,
         "the function foo() is not one sqlglot's T-SQL dialect knows"),
        ("IF 1 IN (SELECT 1) PRINT 'x'", TsqlSyntaxError, "IN (subquery) is not supported"),
        ("IF 'a' LIKE 'a' ESCAPE '!' PRINT 'x'", TsqlSyntaxError,
         "LIKE ... ESCAPE is not supported"),
        ("IF 1 = 1 AND PRINT 'x'", TsqlSyntaxError, "found 'PRINT' at line 1, column 14"),
        ("IF (1 = 1 PRINT 'x'", TsqlSyntaxError, "at line 1, column 11"),
        ("IF 1 IS 2 PRINT 'x'", TsqlSyntaxError, "expected NULL after IS"),
        ("IF 1 NOT = 1 PRINT 'x'", TsqlSyntaxError, "expected IN or LIKE after NOT"),
        ("PRINT @@VERSION", TsqlSyntaxError,
         "the system function @@VERSION is not supported"),
        ("PRINT LEN(1, 2)", TsqlSyntaxError, "LEN at line 1, column 7 takes 1 argument(s)"),
        ("PRINT COALESCE(1)", TsqlSyntaxError, "takes at least 2 argument(s), not 1"),
        ("SET ANSI_NULLS ON", TsqlSyntaxError, "of the SET options only NOCOUNT and "
         "XACT_ABORT ON are supported"),
        ("SET XACT_ABORT OFF", TsqlSyntaxError,
         "SET XACT_ABORT OFF at line 1, column 16 is not supported"),
        ("SET NOCOUNT MAYBE", TsqlSyntaxError, "expected ON or OFF after SET NOCOUNT"),
        ("DECLARE @s NVARCHAR(10) = N'x'; EXEC (@s)", TsqlSyntaxError,
         "EXEC at line 1, column 33 failed: Msg 102, Level 15, State 1, Line 1 of the "
         "dynamic SQL"),
        ("WHILE 1 = 1 BEGIN PRINT 'x'\nEND TRY", TsqlSyntaxError,
         "expected END to close the BEGIN at line 1, column 13 but found 'END' at line 2, "
         "column 1 (END TRY closes no block here)"),
    ],
)
def test_bad_input_is_refused_with_its_line_and_column(db, text, error, message):
    with pytest.raises(error) as caught:
        db.execute(text)
    assert message in str(caught.value)


@pytest.mark.parametrize(
    "text",
    ["BEGIN " * 150 + "PRINT 1" + " END" * 150, "IF 1 = 1 " * 150 + "PRINT 1",
     "IF " + "NOT " * 150 + "1 = 1 PRINT 1", "IF " + "(" * 150 + "1 = 1" + ")" * 150 + " PRINT 1",
     "PRINT 1" + " + 1" * 150, "IF " + " AND ".join(["1 = 1"] * 150) + " PRINT 1",
     "PRINT " + "LEN(" * 150 + "1" + ")" * 150],
)
def test_text_nested_too_deeply_is_refused_where_it_goes_too_deep(db, text):
    with pytest.raises(TsqlSyntaxError, match=r"at line 1, column \d+ is nested too deeply"):
        db.execute(text)


def test_nesting_up_to_the_limit_runs(db):
    assert printed(db, "IF " + "(" * 90 + "1 = 1" + ")" * 90 + " PRINT 'deep'") == ["deep"]
    assert printed(db, "BEGIN " * 90 + "PRINT 'deep'" + " END" * 90) == ["deep"]


def test_a_refused_batch_changes_nothing(db):
    before = db.queues(), db.services()
    # The first statements are good; the IF at the end is not: nothing runs, not even the
    # loop that would create queues, and no line is printed.
    text = ("DECLARE @i INT = 0;\nWHILE @i < 3 BEGIN SET @i = @i + 1; CREATE QUEUE Qrefused; "
            "DROP QUEUE Qrefused END\nCREATE QUEUE Qkept;\nPRINT 'ran';\nIF @i = 3 PRINT")
    with pytest.raises(TsqlSyntaxError, match="at line 5, column 16") as caught:
        db.execute(text)
    assert not hasattr(caught.value, "results")
    assert (db.queues(), db.services()) == before


def test_pybroker_sql_refuses_a_bad_batch_before_it_runs(tmp_path):
    path = tmp_path / "f.duckdb"
    assert run("create-database", path, "D").returncode == 0
    done = run("sql", path, "-d", "D", "-", stdin="PRINT 'a'\nCREATE QUEUE Q\nIF 1 = 1 BREAK")
    assert done.returncode != 0
    assert "BREAK at line 3, column 10 is outside a WHILE loop" in done.stderr
    assert "a\n" not in done.stderr.splitlines(keepends=True)  # the PRINT did not run
    with pybroker.connect(path, worker=False) as inst:
        assert inst.database("D").queues() == []


# -- mutated control flow: parsed, or refused with a line and column ----------------------

CONTROL_FLOW = (
    TUTORIAL,
    "DECLARE @i INT = 0; WHILE @i < 3 BEGIN SET @i = @i + 1; IF @i = 2 CONTINUE; "
    "IF @i > 5 BREAK ELSE PRINT @i END",
    "IF (1 = 2 OR N'a' LIKE N'[a-c]%') AND NOT 3 IN (1, 2) AND NULL IS NULL PRINT 'x'; "
    "ELSE BEGIN PRINT ISNULL(NULL, LEN(N'ab')) END RETURN",
    "SET NOCOUNT ON; PRINT @@ROWCOUNT + @@TRANCOUNT * 2 / 1 % 3; BEGIN TRAN; COMMIT",
)
CONTROL_PIECES = st.one_of(
    st.sampled_from(["IF", "ELSE", "WHILE", "BEGIN", "END", "BREAK", "CONTINUE", "RETURN",
                     "PRINT", "NOT", "AND", "OR", "IS", "NULL", "IN", "LIKE", "(", ")", "=",
                     "<", ">", "!", "<>", ";", "'", "@@ROWCOUNT", "@i", "1", "\n", "GO",
                     "BEGIN TRY", "END CONVERSATION", "EXISTS"]),
    st.text(max_size=3),
)


@st.composite
def mutated_control_flow(draw) -> str:
    text = draw(st.sampled_from(CONTROL_FLOW))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(text)))
        end = min(len(text), at + draw(st.integers(1, 10)))
        kind = draw(st.sampled_from(["insert", "delete", "duplicate", "truncate"]))
        if kind == "insert":
            text = text[:at] + " " + draw(CONTROL_PIECES) + " " + text[at:]
        elif kind == "delete":
            text = text[:at] + text[end:]
        elif kind == "duplicate":
            text = text[:end] + text[at:end] * draw(st.integers(1, 30)) + text[end:]
        else:
            text = text[:at]
    return text


@settings(derandomize=True, deadline=None, database=None, max_examples=500)
@given(text=mutated_control_flow())
def test_mutated_control_flow_parses_or_is_refused_with_its_line_and_column(text):
    # Parsed only: a mutation may well make a loop that never ends, as SQL Server would run.
    try:
        parse_batches(text)
    except TsqlSyntaxError as exc:
        assert re.search(r"line \d+, column \d+", str(exc)), str(exc)


# -- generated programs against a reference evaluator -------------------------------------

# Programs over integer variables @n0..@n2, text variables @s0..@s1 and a DECIMAL(10, 2)
# @d0. Every loop counts
# on a counter of its own that nothing else assigns and that goes up first in its body, so
# each loop runs at most its bound and BREAK/CONTINUE cannot make it run away.
INTS, TEXTS, DECIMALS = ("@n0", "@n1", "@n2"), ("@s0", "@s1"), ("@d0",)
CENT = Decimal("0.01")
LETTERS = "abAB"


@dataclass(frozen=True)
class Lit:
    value: int | str | Decimal


@dataclass(frozen=True)
class Var:
    name: str


@dataclass(frozen=True)
class Add:  # int + int, or text + text
    left: object
    right: object


@dataclass(frozen=True)
class Sub:
    left: object
    right: object


@dataclass(frozen=True)
class AsText:  # CAST(int AS NVARCHAR(20))
    operand: object


@dataclass(frozen=True)
class Cmp:
    operator: str
    left: object
    right: object


@dataclass(frozen=True)
class BoolOp:
    operator: str  # AND, OR
    left: object
    right: object


@dataclass(frozen=True)
class NotOp:
    operand: object


@dataclass(frozen=True)
class SetVar:
    name: str
    value: object


@dataclass(frozen=True)
class PrintOut:
    value: object


@dataclass(frozen=True)
class IfElse:
    condition: object
    then: tuple
    otherwise: tuple | None


@dataclass(frozen=True)
class Loop:
    counter: str
    bound: int
    body: tuple


@dataclass(frozen=True)
class Jump:
    word: str  # BREAK, CONTINUE


def int_expressions() -> st.SearchStrategy:
    leaf = st.one_of(st.integers(-20, 20).map(Lit), st.sampled_from(INTS).map(Var))
    return st.one_of(leaf, st.builds(Add, leaf, leaf), st.builds(Sub, leaf, leaf))


def text_expressions() -> st.SearchStrategy:
    literal = st.text(LETTERS, max_size=3).map(Lit)
    leaf = st.one_of(literal, st.sampled_from(TEXTS).map(Var))
    return st.one_of(leaf, st.builds(Add, st.sampled_from(TEXTS).map(Var), literal),
                     st.builds(Add, literal, st.sampled_from(TEXTS).map(Var)),
                     st.builds(AsText, int_expressions()))


def decimal_expressions() -> st.SearchStrategy:
    """DECIMAL(.., 2) values: a literal of two places, @d0, their sums and differences
    with integers (SQL Server's scale: the larger, 2)."""
    literal = st.decimals(-20, 20, places=2, allow_nan=False, allow_infinity=False).map(Lit)
    leaf = st.one_of(literal, st.sampled_from(DECIMALS).map(Var))
    whole = st.one_of(st.integers(-20, 20).map(Lit), st.sampled_from(INTS).map(Var))
    return st.one_of(leaf, st.builds(Add, leaf, leaf), st.builds(Sub, leaf, whole),
                     st.builds(Add, whole, leaf))


INT_EXPRESSIONS, TEXT_EXPRESSIONS = int_expressions(), text_expressions()
DECIMAL_EXPRESSIONS = decimal_expressions()
OPERATORS = st.sampled_from(["=", "<>", "<", ">", "<=", ">="])


def conditions() -> st.SearchStrategy:
    # Text compared is letters only: how a collation orders '-' or digits is left out.
    letters = st.one_of(st.text(LETTERS, max_size=3).map(Lit), st.sampled_from(TEXTS).map(Var))
    comparison = st.one_of(st.builds(Cmp, OPERATORS, INT_EXPRESSIONS, INT_EXPRESSIONS),
                           st.builds(Cmp, OPERATORS, letters, letters),
                           st.builds(Cmp, OPERATORS, DECIMAL_EXPRESSIONS,
                                     st.one_of(INT_EXPRESSIONS, DECIMAL_EXPRESSIONS)))
    return st.recursive(comparison, lambda inner: st.one_of(
        st.builds(BoolOp, st.sampled_from(["AND", "OR"]), inner, inner),
        st.builds(NotOp, inner)), max_leaves=4)


CONDITIONS = conditions()
SIMPLE_STATEMENTS = st.one_of(
    st.builds(SetVar, st.sampled_from(INTS), INT_EXPRESSIONS),
    st.builds(SetVar, st.sampled_from(TEXTS), TEXT_EXPRESSIONS.filter(
        lambda e: not isinstance(e, AsText))),
    st.builds(SetVar, st.sampled_from(DECIMALS), st.one_of(DECIMAL_EXPRESSIONS,
                                                           INT_EXPRESSIONS)),
    st.builds(PrintOut, st.one_of(INT_EXPRESSIONS, TEXT_EXPRESSIONS, DECIMAL_EXPRESSIONS)))


@st.composite
def statements(draw, depth: int, loops: int, counters: list[str]) -> object:
    kinds = ["simple", "simple"]
    if depth < 3:
        kinds.append("if")
        if loops < 2:
            kinds.append("while")
    if loops:
        kinds.append("jump")
    kind = draw(st.sampled_from(kinds))
    if kind == "simple":
        return draw(SIMPLE_STATEMENTS)
    if kind == "jump":
        return Jump(draw(st.sampled_from(["BREAK", "CONTINUE"])))
    if kind == "if":
        then = draw(blocks(depth + 1, loops, counters))
        otherwise = draw(st.none() | blocks(depth + 1, loops, counters))
        return IfElse(draw(CONDITIONS), then, otherwise)
    counter = f"@c{len(counters)}"
    counters.append(counter)
    return Loop(counter, draw(st.integers(0, 4)), draw(blocks(depth + 1, loops + 1, counters)))


def blocks(depth: int, loops: int, counters: list[str]) -> st.SearchStrategy:
    return st.lists(statements(depth, loops, counters), min_size=1, max_size=4).map(tuple)


@st.composite
def programs(draw) -> tuple[tuple, list[str]]:
    counters: list[str] = []
    body = draw(st.lists(statements(0, 0, counters), min_size=1, max_size=6).map(tuple))
    return body, counters


def render(node: object) -> str:
    """The T-SQL of a node of a generated program."""
    if isinstance(node, Lit):
        if isinstance(node.value, int | Decimal):
            return str(node.value) if node.value >= 0 else f"({node.value})"
        return "N'" + node.value + "'"
    if isinstance(node, Var):
        return node.name
    if isinstance(node, Add):
        return f"({render(node.left)} + {render(node.right)})"
    if isinstance(node, Sub):
        return f"({render(node.left)} - {render(node.right)})"
    if isinstance(node, AsText):
        return f"CAST({render(node.operand)} AS NVARCHAR(20))"
    if isinstance(node, Cmp):
        return f"{render(node.left)} {node.operator} {render(node.right)}"
    if isinstance(node, BoolOp):
        return f"({render(node.left)} {node.operator} {render(node.right)})"
    if isinstance(node, NotOp):
        return f"NOT ({render(node.operand)})"
    if isinstance(node, SetVar):
        return f"SET {node.name} = {render(node.value)};"
    if isinstance(node, PrintOut):
        return f"PRINT {render(node.value)};"
    if isinstance(node, Jump):
        return f"{node.word};"
    if isinstance(node, IfElse):
        text = f"IF {render(node.condition)}\nBEGIN\n{render_block(node.then)}\nEND"
        if node.otherwise is not None:
            text += f"\nELSE\nBEGIN\n{render_block(node.otherwise)}\nEND"
        return text
    assert isinstance(node, Loop)
    return (f"SET {node.counter} = 0;\nWHILE {node.counter} < {node.bound}\nBEGIN\n"
            f"SET {node.counter} = {node.counter} + 1;\n{render_block(node.body)}\nEND")


def render_block(body: tuple) -> str:
    return "\n".join(render(s) for s in body)


def render_program(body: tuple, counters: list[str]) -> str:
    declared = [f"{n} INT = 0" for n in (*INTS, *counters)] + [
        f"{s} NVARCHAR(MAX) = N''" for s in TEXTS] + [f"{d} DECIMAL(10, 2) = 0" for d in DECIMALS]
    return f"DECLARE {', '.join(declared)};\n{render_block(body)}"


class Reference:
    """What a generated program prints, by the rules SQL Server's documentation gives:
    text compared without regard to case (and ignoring trailing spaces), no NULLs here; a
    DECIMAL's sum with a DECIMAL or an integer keeps the larger scale; a value assigned to
    DECIMAL(10, 2) is rounded to two places; no -0.00."""

    def __init__(self) -> None:
        self.variables: dict[str, int | str | Decimal] = dict.fromkeys(INTS, 0)
        self.variables.update(dict.fromkeys(TEXTS, ""))
        self.variables.update(dict.fromkeys(DECIMALS, Decimal("0.00")))
        self.printed: list[str] = []

    def value(self, node: object) -> int | str | Decimal:
        found = self._value(node)
        return found if not isinstance(found, Decimal) or found else abs(found)

    def _value(self, node: object) -> int | str | Decimal:
        if isinstance(node, Lit):
            return node.value
        if isinstance(node, Var):
            return self.variables[node.name]
        if isinstance(node, Add):
            return self.value(node.left) + self.value(node.right)  # type: ignore[operator]
        if isinstance(node, Sub):
            return self.value(node.left) - self.value(node.right)  # type: ignore[operator]
        assert isinstance(node, AsText)
        return str(self.value(node.operand))

    def truth(self, node: object) -> bool:
        if isinstance(node, BoolOp):
            if node.operator == "AND":
                return self.truth(node.left) and self.truth(node.right)
            return self.truth(node.left) or self.truth(node.right)
        if isinstance(node, NotOp):
            return not self.truth(node.operand)
        assert isinstance(node, Cmp)
        left, right = self.value(node.left), self.value(node.right)
        if isinstance(left, str):
            left, right = left.rstrip(" ").lower(), str(right).rstrip(" ").lower()
        return {"=": left == right, "<>": left != right, "<": left < right,
                ">": left > right, "<=": left <= right, ">=": left >= right}[node.operator]

    def run(self, body: tuple) -> str | None:
        for node in body:
            if isinstance(node, SetVar):
                value = self.value(node.value)
                if node.name in DECIMALS:
                    value = Decimal(value).quantize(CENT, rounding=ROUND_HALF_UP)
                self.variables[node.name] = value
            elif isinstance(node, PrintOut):
                self.printed.append(str(self.value(node.value)))
            elif isinstance(node, Jump):
                return node.word
            elif isinstance(node, IfElse):
                branch = node.then if self.truth(node.condition) else node.otherwise
                signal = self.run(branch) if branch is not None else None
                if signal:
                    return signal
            else:
                assert isinstance(node, Loop)
                count = 0
                while count < node.bound:
                    count += 1
                    if self.run(node.body) == "BREAK":
                        break
        return None


@settings(derandomize=True, deadline=None, database=None, max_examples=300,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(program=programs())
def test_generated_programs_print_what_the_reference_prints(db, program):
    body, counters = program
    reference = Reference()
    reference.run(body)
    text = render_program(body, counters)
    assert db.execute(text).messages == reference.printed, text
