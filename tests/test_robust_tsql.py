"""The T-SQL parser under generated input. Mutated valid statements either run or
are refused with a BrokerError, and a refused batch leaves the catalog exactly as it was.
``pybroker fuzz tsql`` is the long version of the same (README, Reliability)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pybroker
from pybroker import BrokerError, TsqlSyntaxError
from pybroker.cli.main import main
from pybroker.core.tsql import parse_batch
from pybroker.devtools.fuzz import targets as fuzz
from pybroker.devtools.fuzz.targets import TSQL_CORPUS, catalog_snapshot

SETTINGS = settings(derandomize=True, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])
PARSE = settings(SETTINGS, max_examples=400)
EXECUTE = settings(SETTINGS, max_examples=120)

PIECES = st.one_of(
    st.sampled_from(fuzz._SPECIAL),
    st.text(max_size=6),  # any code points, lone surrogates and NUL included
    st.sampled_from(["{", "}", "{}", "{where}", "\ufeff", "\x00", "\ud800", "\udfff"]),
)


@st.composite
def mutated_batches(draw) -> str:
    """A corpus batch with 1-4 edits: insert a piece, delete, duplicate, truncate."""
    text = draw(st.sampled_from(TSQL_CORPUS))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(text)))
        end = min(len(text), at + draw(st.integers(1, 10)))
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


@PARSE
@given(text=st.one_of(mutated_batches(), st.text(max_size=40)))
def test_the_parser_answers_any_text_with_statements_or_a_broker_error(text):
    try:
        statements = parse_batch(text)
    except BrokerError as exc:
        assert str(exc)  # a message that says what was wrong
        return
    assert statements


@pytest.fixture(scope="module")
def database():
    inst = pybroker.connect(None, worker=False)
    db = inst.create_database("Fuzz")
    db.execute(TSQL_CORPUS[-1])  # a message type, contract, queue, service and route
    yield db
    inst.close()


@EXECUTE
@given(text=mutated_batches())
def test_a_refused_batch_leaves_the_catalog_exactly_unchanged(database, text):
    before = catalog_snapshot(database)
    try:
        database.execute(text)
    except BrokerError:
        assert catalog_snapshot(database) == before


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "unexpected character '{' at line 1, column 1"),
        ("DROP ROUTE x }", "unexpected character '}' at line 1, column 14"),
        ("DROP ROUTE [{where}] }", "'}' at line 1, column 22"),
        ("DROP ROUTE x\n\x00", "a NUL character at line 2, column 1"),
        ("DROP ROUTE [a\ud800]", "lone surrogate U+D800 at line 1, column 14"),
        ("DROP ROUTE x \ufeff", "unexpected character '\\ufeff' at line 1, column 14"),
    ],
)
def test_characters_are_refused_with_their_place(text, message):
    with pytest.raises(TsqlSyntaxError) as caught:
        parse_batch(text)
    assert message in str(caught.value)


def test_a_script_saved_with_a_byte_order_mark_runs():
    (statement,) = parse_batch("\ufeffDROP ROUTE [R]")
    assert statement.name == "R"


def test_the_fuzz_command_runs_the_tsql_target(capsys):
    assert main(["fuzz", "tsql", "--count", "3000", "--seed", "7"]) == 0
    out = capsys.readouterr().out
    assert "fuzz tsql: 3,000 inputs" in out
    assert "crashes: 0; hangs: 0" in out


def test_the_fuzz_command_counts_crashes_and_hangs(capsys):
    """A registered decoder that crashes or hangs is caught and counted, not fatal."""
    def decode(data: int) -> None:
        if data % 3 == 0:
            raise KeyError(data)  # a crash: not a BrokerError
        if data % 3 == 1:
            raise pybroker.InvalidArgumentError("refused")
        if data == 5:
            while True:  # a hang, ended by the time-out
                pass

    fuzz.register("test-numbers", fuzz.Target("numbers", lambda rng: rng.randrange(9), decode))
    try:
        report = fuzz.run("test-numbers", count=60, seed=2, timeout=0.2)
        assert report.count == 60
        assert report.crashes > 0 and report.refused > 0 and report.hangs > 0
        assert report.crashes + report.refused + report.hangs + report.accepted == 60
        assert report.examples[0]["kind"] in ("crash", "hang")
        assert main(["fuzz", "test-numbers", "--count", "30", "--timeout", "0.2"]) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "crash(es)" in err[0]
    finally:
        del fuzz.TARGETS["test-numbers"]


def test_the_fuzz_programs_parse_with_their_dynamic_texts():
    """Each program the tsql target mutates parses, the literal texts of its dynamic SQL
    too; a literal text that is not understood is refused with its line and column."""
    runner = fuzz._TsqlRunner()
    for program in fuzz.PROGRAM_CORPUS:
        runner(program)  # raises if any piece is refused
    assert any("sp_executesql" in p for p in fuzz.PROGRAM_CORPUS)
    with pytest.raises(TsqlSyntaxError, match=r"Line 2 of the dynamic SQL run by EXEC at "
                       r"line 1, column 1 .*at line 2, column 7"):
        runner("EXEC (N'PRINT 1\nPRINT @nope')")


def test_the_fuzz_target_counts_a_refusal_without_its_place_as_a_crash(monkeypatch):
    def refuse(text: str, **_: object) -> None:
        raise TsqlSyntaxError("refused somewhere")

    monkeypatch.setattr("pybroker.core.tsql.batches.parse_batches", refuse)
    with pytest.raises(AssertionError, match="a refusal without its line and column"):
        fuzz._TsqlRunner()("PRINT 1")
