"""DuckDB's worker threads for an instance (pybroker.storage.store: DEFAULT_THREADS,
check_threads): one for an instance opened for writing, DuckDB's own for a read-only open,
the ``threads`` keyword, and refusals."""

from __future__ import annotations

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pybroker
from pybroker import InvalidArgumentError
from pybroker.storage.store import DEFAULT_THREADS, MAX_THREADS, check_threads


def threads_of(inst: pybroker.Instance) -> int:
    return inst.kernel.store.fetchone("SELECT current_setting('threads')")[0]


def duckdb_default() -> int:
    con = duckdb.connect()
    try:
        return con.execute("SELECT current_setting('threads')").fetchone()[0]
    finally:
        con.close()


def test_an_instance_runs_on_one_thread_and_a_read_only_open_on_duckdbs_default(tmp_path):
    assert DEFAULT_THREADS == 1
    with pybroker.connect(tmp_path / "i.duckdb", worker=False) as inst:
        assert threads_of(inst) == 1
        db = inst.create_database("D")
        db.create_queue("Q")
        db.create_service("S", queue="Q", contracts=["DEFAULT"])
        with db.transaction():
            conv = db.begin_dialog("S", "S")
            conv.send(b"one thread")
        assert [m.message_body for m in db.receive("Q", max_messages=5)] == [b"one thread"]
    with pybroker.connect(None, worker=False) as inst:
        assert threads_of(inst) == 1
    with pybroker.connect(tmp_path / "i.duckdb", read_only=True, worker=False) as inst:
        assert threads_of(inst) == duckdb_default()


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_the_keyword_is_applied_to_a_file_in_memory_and_read_only(tmp_path, threads):
    path = tmp_path / "i.duckdb"
    with pybroker.connect(path, worker=False, threads=threads) as inst:
        assert threads_of(inst) == threads
    with pybroker.connect(None, worker=False, threads=threads) as inst:
        assert threads_of(inst) == threads
    with pybroker.connect(path, worker=False, threads=threads, read_only=True) as inst:
        assert threads_of(inst) == threads


@pytest.mark.parametrize("value", [0, -1, MAX_THREADS + 1, True, 2.0, "2", "many"])
def test_a_bad_count_is_refused_before_the_file_is_made(tmp_path, value):
    path = tmp_path / "i.duckdb"
    with pytest.raises(InvalidArgumentError,
                       match=f"threads must be a whole number from 1 to {MAX_THREADS:,}"):
        pybroker.connect(path, threads=value)
    assert not path.exists()


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.integers(), st.floats(allow_nan=True), st.text(max_size=8),
                 st.booleans(), st.binary(max_size=4)))
def test_any_value_is_a_count_or_a_clear_refusal(value):
    ok = type(value) is int and 1 <= value <= MAX_THREADS
    if ok:
        assert check_threads(value) == value
    else:
        with pytest.raises(InvalidArgumentError, match="threads must be a whole number"):
            check_threads(value)
