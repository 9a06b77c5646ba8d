"""DuckDB's memory limit of an instance (pybroker.storage.store: DEFAULT_MEMORY_LIMIT, BODY_ROOM):
the default for a file, the ``memory_limit`` keyword, refusals, and the room it makes for a
large body."""

from __future__ import annotations

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pybroker
from pybroker import InvalidArgumentError
from pybroker.arguments import MIN_MEMORY_LIMIT, check_memory_limit
from pybroker.storage.store import BODY_ROOM, DEFAULT_MEMORY_LIMIT

MIB = 2**20


def limit_of(inst: pybroker.Instance) -> str:
    return inst.kernel.store.fetchone("SELECT current_setting('memory_limit')")[0]


def duckdb_default() -> str:
    con = duckdb.connect()
    try:
        return con.execute("SELECT current_setting('memory_limit')").fetchone()[0]
    finally:
        con.close()


def test_a_file_instance_runs_under_the_default_limit_and_an_in_memory_one_under_duckdbs(
        tmp_path):
    assert DEFAULT_MEMORY_LIMIT == "256MiB"
    with pybroker.connect(tmp_path / "i.duckdb", worker=False) as inst:
        assert limit_of(inst) == "256.0 MiB"
        assert inst.kernel.store.memory_limit == 256 * MIB
    with pybroker.connect(tmp_path / "i.duckdb", read_only=True, worker=False) as inst:
        assert limit_of(inst) == duckdb_default()  # a reader holds no rows of its own
    with pybroker.connect(None, worker=False) as inst:
        assert limit_of(inst) == duckdb_default()
        assert inst.kernel.store.memory_limit is None


@pytest.mark.parametrize(("given", "shown", "size"), [
    ("512MiB", "512.0 MiB", 512 * MIB),
    ("1GB", "953.6 MiB", 10**9),
    (" 1.5 gib ", "1.5 GiB", 3 * 2**29),
    ("64MiB", "64.0 MiB", MIN_MEMORY_LIMIT),
])
def test_the_keyword_is_applied_to_a_file_and_in_memory(tmp_path, given, shown, size):
    assert check_memory_limit(given) == size
    with pybroker.connect(tmp_path / "i.duckdb", worker=False, memory_limit=given) as inst:
        assert limit_of(inst) == shown
    with pybroker.connect(None, worker=False, memory_limit=given) as inst:
        assert limit_of(inst) == shown


@pytest.mark.parametrize(("value", "words"), [
    ("256", "must be a size with its unit"),
    ("lots", "must be a size with its unit"),
    ("-1GB", "must be a size with its unit"),
    ("1 PB", "must be a size with its unit"),
    (256 * MIB, "must be a size with its unit"),
    (b"256MiB", "must be a size with its unit"),
    ("", "must be a size with its unit"),
    ("1KB", "too small: an instance needs at least 64 MiB"),
    ("63MiB", "too small: an instance needs at least 64 MiB"),
    ("0GB", "too small"),
])
def test_a_bad_limit_is_refused_before_the_file_is_made(tmp_path, value, words):
    path = tmp_path / "i.duckdb"
    with pytest.raises(InvalidArgumentError, match=words):
        pybroker.connect(path, memory_limit=value)
    assert not path.exists()


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(max_size=12), st.integers(), st.floats(), st.none(),
                 st.from_regex(r"\A[0-9]{1,6}(\.[0-9]{1,3})? ?(B|KB|MB|GB|KiB|MiB|GiB)\Z")))
def test_any_value_is_a_size_or_a_clear_refusal(value):
    try:
        size = check_memory_limit(value)
    except InvalidArgumentError as exc:
        assert "memory_limit" in str(exc)
    else:
        assert isinstance(size, int) and size >= MIN_MEMORY_LIMIT


def test_a_large_body_raises_the_limit_for_as_long_as_the_file_holds_it(tmp_path):
    """DuckDB holds a body in one block: the limit leaves room for BODY_ROOM times it, when
    it is sent and when a file that holds it is opened again (its column's statistics)."""
    path = tmp_path / "i.duckdb"
    body = bytes(range(256)) * (4 * MIB // 256)  # 4 MiB: at least 1/32 of 64 MiB
    raised = f"{(64 * MIB + BODY_ROOM * len(body)) // MIB}.0 MiB"
    with pybroker.connect(path, worker=False, memory_limit="64MiB") as inst:
        a = inst.create_database("A")
        a.create_queue("QA")
        a.create_service("SA", queue="QA")
        a.create_queue("QB")
        a.create_service("SB", queue="QB", contracts=["DEFAULT"])
        a.begin_dialog("SA", "SB").send(b"small")
        assert limit_of(inst) == "64.0 MiB"  # a small body needs no room
        a.begin_dialog("SA", "SB").send(body)
        assert limit_of(inst) == raised == "76.0 MiB"
    with pybroker.connect(path, worker=False, memory_limit="64MiB") as inst:
        assert limit_of(inst) == raised
        got = inst.database("A").receive("QB", max_messages=10)
        assert [m.message_body for m in got] == [b"small"]
        got = inst.database("A").receive("QB", max_messages=10)
        assert [m.message_body for m in got] == [body]
