"""Dynamic SQL in a T-SQL batch (``Database.execute()``): EXEC (text) and EXEC sp_executesql
run their text as a batch of its own, in a scope of its own (the caller's variables are not
visible; sp_executesql's parameters are, and its OUTPUT parameters come back); a syntax
error in the text is an error of that EXEC when it runs (SQL Server's 102, with the line
inside the text), which a TRY catches; generated texts never crash the interpreter."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pybroker
from pybroker import TsqlSyntaxError
from pybroker.core.tsql.error_numbers import TsqlError
from tests.tsql_helpers import printed, program_database


@pytest.fixture(scope="module")
def db():
    yield from program_database("Dyn")


def quoted(text: str) -> str:
    return "N'" + text.replace("'", "''") + "'"


@pytest.mark.parametrize(("text", "lines"), [
    ("DECLARE @s NVARCHAR(MAX) = N'PRINT 1; PRINT ''two'''; EXEC (@s)", ["1", "two"]),
    ("DECLARE @n INT = 4; EXECUTE (N'PRINT ' + N'3' + N' + 1')", ["4"]),
    ("DECLARE @s NVARCHAR(50); EXEC (@s); PRINT @@ROWCOUNT; EXEC (N'  -- nothing');"
     "PRINT 'ran'", ["0", "ran"]),
    ("EXEC (N'DECLARE @i INT = 0; WHILE @i < 3 BEGIN SET @i = @i + 1; PRINT @i END')",
     ["1", "2", "3"]),
    ("EXEC (N'SELECT name FROM sys.services WHERE name IN (''S'', ''T'')'); "
     "PRINT @@ROWCOUNT", ["2"]),
    ("DECLARE @o INT; EXEC sp_executesql N'SET @q = @p * 2', N'@p INT, @q INT OUTPUT', "
     "@p = 21, @q = @o OUTPUT; PRINT @o", ["42"]),
    ("DECLARE @o NVARCHAR(10), @rc INT = 7; EXEC @rc = sys.sp_executesql @stmt = N'SET @q = "
     "@a + N''!''', @params = N'@a NVARCHAR(5), @q NVARCHAR(10) OUT', @a = N'hi', "
     "@q = @o OUTPUT; PRINT @o; PRINT @rc", ["hi!", "0"]),
    ("DECLARE @o INT; EXEC sp_executesql N'SET @q = @p', N'@p INT, @q INT OUTPUT', 5, "
     "@o OUTPUT; PRINT @o", ["5"]),
    ("EXEC sp_executesql N'PRINT ISNULL(@p, -1)', N'@p INT = NULL'", ["-1"]),
    ("EXEC sp_executesql N'EXEC (N''PRINT ''''deep'''''')'", ["deep"]),
    ("DECLARE @x INT = 1; EXEC (N'DECLARE @x INT = 2; PRINT @x'); PRINT @x", ["2", "1"]),
])  # fmt: skip
def test_dynamic_sql_runs_in_a_scope_of_its_own(db, text, lines):
    assert printed(db, text) == lines


def test_the_callers_variables_are_not_visible_in_the_text(db):
    with pytest.raises(TsqlSyntaxError) as caught:
        db.execute("DECLARE @x INT = 1;\nPRINT 'before';\nEXEC (N'PRINT 1\nPRINT @x')")
    assert str(caught.value).startswith(
        "EXEC at line 3, column 1 failed: Msg 102, Level 15, State 1, Line 2 of the dynamic "
        "SQL run by EXEC at line 3, column 1")
    assert "the variable @x at line 2, column 7 is not declared" in str(caught.value)
    assert caught.value.results.messages == ["before"]  # the text ran nothing


def test_a_syntax_error_in_the_text_goes_to_catch_with_its_line(db):
    text = ("BEGIN TRY\n  EXEC (N'PRINT 1\n\nSEND ON')\nEND TRY\nBEGIN CATCH\n  PRINT "
            "ERROR_NUMBER(); PRINT ERROR_LINE(); PRINT ISNULL(ERROR_PROCEDURE(), N'-'); "
            "PRINT ERROR_SEVERITY()\nEND CATCH")
    assert printed(db, text) == ["102", "3", "-", "15"]


def test_a_runtime_error_in_the_text_says_its_line_there(db):
    with pytest.raises(TsqlError) as caught:
        db.execute("PRINT 'a'\nEXEC (N'PRINT ''b''\nTHROW 50010, N''no room'', 2')")
    assert str(caught.value) == (
        "Msg 50010, Level 16, State 2, Line 2: THROW at line 2, column 1 failed: no room; "
        "the 1 statement(s) before it ran (in the dynamic SQL run by EXEC at line 2, "
        "column 1)")
    assert (caught.value.number, caught.value.results.messages) == (50010, ["a", "b"])
    text = ("BEGIN TRY EXEC (N'PRINT 1\nTHROW 50011, N''x'', 1') END TRY BEGIN CATCH "
            "PRINT ERROR_LINE(); PRINT ERROR_NUMBER() END CATCH")
    assert printed(db, text) == ["1", "2", "50011"]


def test_dynamic_sql_joins_the_callers_transaction(db):
    count = "SELECT count(*) FROM sys.conversation_endpoints"
    before = db.instance.sql(count).fetchone()
    text = ("BEGIN TRAN; EXEC (N'DECLARE @h UNIQUEIDENTIFIER; BEGIN DIALOG @h FROM SERVICE S "
            "TO SERVICE ''T''; PRINT @@TRANCOUNT'); ROLLBACK")
    assert printed(db, text) == ["1"]
    assert db.instance.sql(count).fetchone() == before
    db.execute("EXEC (N'DECLARE @h UNIQUEIDENTIFIER; BEGIN DIALOG @h FROM SERVICE S TO "
               "SERVICE ''T''; END CONVERSATION @h WITH CLEANUP')")
    assert db.instance.sql(count).fetchone() == before  # ran, and cleaned up after itself


def test_dynamic_sql_creates_a_procedure_and_use_lasts_only_inside_it(db):
    db.execute("EXEC (N'CREATE PROCEDURE dbo.Made @v INT AS PRINT @v * 10')")
    assert printed(db, "EXEC Made 4") == ["40"]
    db.execute("DROP PROCEDURE Made")
    lines = printed(db, "EXEC (N'USE master; PRINT DB_ID()'); PRINT DB_ID()")
    assert lines[0] == "1" and lines[1] != "1"


@pytest.mark.parametrize(("text", "number", "message"), [
    ("EXEC sp_executesql", 201, "expects parameter @stmt"),
    ("EXEC sp_executesql N'PRINT 1', N'@p INT', 1, 2", 8144, "too many arguments"),
    ("EXEC sp_executesql N'PRINT 1', N'@p INT'", 201, "expects parameter @p"),
    ("EXEC sp_executesql N'PRINT 1', NULL, 3", 8178, "@params declares no parameter"),
    ("EXEC sp_executesql N'PRINT @p', N'@p INT,, @q INT', 1", 102,
     "the @params of sp_executesql at line 1, column 1 is not understood"),
    ("EXEC sp_executesql N'PRINT 1', N'@p INT', @z = 1", 8145, "@z is not a parameter"),
    ("DECLARE @v INT; EXEC sp_executesql N'PRINT 1', N'@p INT', @p = @v OUTPUT", 8162,
     "was not declared as an OUTPUT"),
    ("EXEC (0x01)", None, "the dynamic SQL at line 1, column 1 must be text, not binary"),
])  # fmt: skip
def test_a_bad_dynamic_call_is_refused_when_it_runs(db, text, number, message):
    with pytest.raises(pybroker.BrokerError, match=re.escape(message)) as caught:
        db.execute(text)
    assert getattr(caught.value, "number", None) == number


@pytest.mark.parametrize(("text", "message"), [
    ("EXEC (@nope)", "the variable @nope at line 2, column 7 is not declared"),
    ("EXEC (N'PRINT 1'", "expected ')' after the dynamic SQL of EXEC (text)"),
    ("EXEC (N'PRINT 1') AS USER = 'x'", "EXEC (...) AS at line 2, column 19 is not supported"),
    ("EXEC other.sp_executesql N'PRINT 1'", "expected sp_executesql or sys.sp_executesql"),
])  # fmt: skip
def test_the_static_batch_is_refused_before_any_of_it_runs(db, text, message):
    count = "SELECT count(*) FROM sys.service_queues"
    before = db.instance.sql(count).fetchone()
    with pytest.raises(TsqlSyntaxError, match=re.escape(message)):
        db.execute(f"CREATE QUEUE Refused;\n{text}")
    assert db.instance.sql(count).fetchone() == before


# -- generated texts: never a crash ----------------------------------------------------------

_PIECES = ("PRINT", "1", "'a'", "N'b'", "+", "-", "(", ")", ",", ";", "=", "<", "DECLARE", "@v",
           "@w", "INT", "NVARCHAR(5)", "SET", "SELECT", "IF", "ELSE", "BEGIN", "END", "TRY",
           "CATCH", "THROW", "50001", "RAISERROR", "EXEC", "RETURN", "BREAK", "CAST", "AS",
           "NULL", "AND", "OR", "NOT", "EXISTS", "FROM", "sys.services", "WHERE", "name",
           "TRAN", "COMMIT", "ROLLBACK", "SEND", "ON", "CONVERSATION", "NEWID()", "\n",
           "--", "/*", "*/", "'", "[", "]", "\"", "GO", "USE", "Dyn", "CREATE", "TABLE",
           "QUEUE", "PROCEDURE", "sp_executesql", "ERROR_LINE()", "@@ROWCOUNT", "é")
_PLACE = re.compile(r"line [0-9]+, column [0-9]+")


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(pieces=st.lists(st.sampled_from(_PIECES), max_size=14),
       spaced=st.booleans(), by_executesql=st.booleans())
def test_generated_dynamic_text_never_crashes(db, pieces, spaced, by_executesql):
    text = (" " if spaced else "").join(pieces)
    call = (f"EXEC sp_executesql {quoted(text)}, N'@v INT', 1" if by_executesql
            else f"EXEC ({quoted(text)})")
    try:
        db.execute(f"BEGIN TRAN;\n{call};\nROLLBACK")
    except pybroker.BrokerError as exc:  # a refusal, or an error of a statement it ran
        assert _PLACE.search(str(exc)), str(exc)
    caught = db.execute(f"BEGIN TRY {call} END TRY BEGIN CATCH PRINT ERROR_NUMBER() END "
                        "CATCH; IF @@TRANCOUNT > 0 ROLLBACK")
    assert all(isinstance(m, str) for m in caught.messages)
