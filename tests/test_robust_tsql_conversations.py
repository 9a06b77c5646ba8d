"""The conversation statements of T-SQL under generated input: any text is parsed into
statements or refused with a BrokerError, and mutated valid scripts either run (returning
result sets) or are refused with a BrokerError; a refused parse changes nothing."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pybroker
from pybroker import BrokerError
from pybroker.core.tsql.batch_interface import ResultSet
from pybroker.core.tsql.conversation_parser import parse_script

SETTINGS = settings(derandomize=True, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])

# Valid scripts; none waits (WAITFOR is parsed only, so no mutation can make one wait).
SCRIPTS = (
    "DECLARE @h UNIQUEIDENTIFIER; BEGIN DIALOG @h FROM SERVICE S TO SERVICE 'T' "
    "ON CONTRACT [DEFAULT] WITH LIFETIME = 60, ENCRYPTION = OFF; "
    "SEND ON CONVERSATION @h (N'<a/>'); SELECT @h AS h",
    "DECLARE @h UNIQUEIDENTIFIER, @b VARBINARY(MAX); BEGIN TRAN; "
    "RECEIVE TOP (1) @h = conversation_handle, @b = message_body FROM dbo.Q; COMMIT",
    "DECLARE @t TABLE (h UNIQUEIDENTIFIER, b NVARCHAR(MAX)); RECEIVE conversation_handle, "
    "CAST(message_body AS NVARCHAR(MAX)) FROM Q INTO @t; SELECT * FROM @t",
    "DECLARE @g UNIQUEIDENTIFIER; GET CONVERSATION GROUP @g FROM Q; "
    "RECEIVE * FROM Q WHERE conversation_group_id = @g",
    "DECLARE @h UNIQUEIDENTIFIER = NEWID(); BEGIN CONVERSATION TIMER (@h) TIMEOUT = 5; "
    "END CONVERSATION @h WITH ERROR = 1 DESCRIPTION = N'x'",
    "DECLARE @n INT = 1, @s NVARCHAR(10) = N'a' + 'b'; SET @n = @n + 2 - 1; "
    "SELECT @s = CONVERT(NVARCHAR(10), @n); SELECT @s AS s, -@n, 0x41, NULL",
    "BEGIN TRANSACTION; CREATE QUEUE Q2; ROLLBACK TRANSACTION",
)
PARSE_ONLY = (
    "DECLARE @h UNIQUEIDENTIFIER; WAITFOR (RECEIVE * FROM Q), TIMEOUT 100",
    "DECLARE @g UNIQUEIDENTIFIER; WAITFOR (GET CONVERSATION GROUP @g FROM Q), TIMEOUT 10",
)
PIECES = st.one_of(
    st.sampled_from(["'", "N'", "(", ")", ",", ";", "=", "+", "-", "@", "@h", "@@x", "0x",
                     "NULL", "TOP", "FROM", "INTO", "WHERE", "WITH", "BEGIN", "END", "TRAN",
                     "COMMIT", "ROLLBACK", "SEND", "RECEIVE", "DECLARE", "CAST(", "AS", "*",
                     "TABLE", "MAX", "99999999999999999999", "\n", "GO", "\x00", "\ud800"]),
    st.text(max_size=4),
)


@st.composite
def mutated(draw, corpus: tuple[str, ...]) -> str:
    text = draw(st.sampled_from(corpus))
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(text)))
        end = min(len(text), at + draw(st.integers(1, 8)))
        kind = draw(st.sampled_from(["insert", "delete", "duplicate", "truncate"]))
        if kind == "insert":
            text = text[:at] + draw(PIECES) + text[at:]
        elif kind == "delete":
            text = text[:at] + text[end:]
        elif kind == "duplicate":
            text = text[:end] + text[at:end] + text[end:]
        else:
            text = text[:at]
    return text


@settings(SETTINGS, max_examples=400)
@given(text=st.one_of(mutated(SCRIPTS + PARSE_ONLY), st.text(max_size=40)))
def test_any_text_parses_into_statements_or_a_broker_error(text):
    try:
        statements = parse_script(text)
    except BrokerError as exc:
        assert str(exc)
        return
    assert statements


@pytest.fixture(scope="module")
def database():
    inst = pybroker.connect(None, worker=False)
    db = inst.create_database("Fuzz")
    db.execute("CREATE QUEUE Q; CREATE SERVICE S ON QUEUE Q; "
               "CREATE SERVICE T ON QUEUE Q ([DEFAULT])")
    yield db
    inst.close()


def _queues(db: pybroker.Database) -> list:
    return sorted(q.name for q in db.queues())


@settings(SETTINGS, max_examples=150)
@given(text=mutated(SCRIPTS))
def test_mutated_scripts_run_or_are_refused_with_a_broker_error(database, text):
    queues = _queues(database)
    try:
        results = database.execute(text)
    except pybroker.TsqlSyntaxError:
        assert _queues(database) == queues  # refused while parsing: nothing ran
        return
    except BrokerError as exc:
        assert str(exc)
        assert all(isinstance(r, ResultSet) for r in getattr(exc, "results", []))
        return
    assert all(isinstance(r, ResultSet) for r in results)


def test_the_unmutated_scripts_run(database):
    for script in SCRIPTS:
        try:
            database.execute(script)
        except BrokerError as exc:  # a timer on a handle NEWID() made up
            assert "does not exist in this instance" in str(exc), script
