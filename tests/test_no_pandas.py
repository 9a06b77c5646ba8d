"""DuckDB's client looks for pandas on every bound parameter; without pandas installed each
look must be answered at once, not by a walk of sys.path (pybroker/no_pandas.py)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

HAS_PANDAS = importlib.util.find_spec("pandas") is not None


@pytest.mark.skipif(HAS_PANDAS, reason="pandas is installed: nothing to short-cut")
def test_bound_statements_do_not_search_sys_path_for_pandas():
    script = """
import importlib.machinery, sys
import pybroker.storage  # installs the finder
import duckdb
searched = []
real = importlib.machinery.PathFinder.find_spec.__func__
def spy(cls, name, path=None, target=None):
    if name == "pandas":
        searched.append(name)
    return real(cls, name, path, target)
importlib.machinery.PathFinder.find_spec = classmethod(spy)
con = duckdb.connect()
for i in range(50):
    con.execute("SELECT $a, $b", {"a": i, "b": "x"}).fetchall()
print(len(searched), "pandas" in sys.modules)
try:
    import pandas
except ImportError as exc:
    print(type(exc).__name__)
import pyarrow
print(pyarrow.table({"a": [1, 2]}).num_rows)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True, timeout=120).stdout.split()
    assert out == ["0", "False", "ModuleNotFoundError", "2"]


@pytest.mark.skipif(HAS_PANDAS, reason="pandas is installed: nothing to short-cut")
def test_asking_whether_pandas_is_there_still_answers_none():
    import importlib

    import pybroker.storage  # noqa: F401  (installs the finder)
    from pybroker import no_pandas

    assert no_pandas._NoPandas in sys.meta_path
    assert importlib.util.find_spec("pandas") is None
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("pandas")


def test_an_installed_pandas_is_never_hidden(monkeypatch):
    from pybroker import no_pandas

    monkeypatch.setattr(sys, "meta_path", [m for m in sys.meta_path
                                           if m is not no_pandas._NoPandas])
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object())
    assert no_pandas.install() is False
    assert no_pandas._NoPandas not in sys.meta_path
    assert no_pandas.builtins_refusing_pandas() is None  # nor is its short cut made


@pytest.mark.skipif(HAS_PANDAS, reason="pandas is installed: nothing to short-cut")
def test_the_stores_statements_ask_no_finder_and_nothing_else_changes():
    """DuckDB's imports under the Store's frames are refused by the Store module's own
    __builtins__ before importlib runs; the same statement from any other module still
    goes through the finder, and builtins.__import__ is the interpreter's own."""
    script = """
import builtins, sys, tempfile
import pybroker.storage as storage
from pybroker import no_pandas
asked = []
real = no_pandas._NoPandas.find_spec
def spy(name, path=None, target=None):
    if name == "pandas":
        asked.append(name)
    return real(name, path, target)
no_pandas._NoPandas.find_spec = staticmethod(spy)
store = storage.Store(tempfile.mkdtemp() + "/i.duckdb")
for i in range(20):
    store.fetchone("SELECT $a, $b, $c", {"a": i, "b": "x", "c": b"y"})
by_store = len(asked)
store.connection.execute("SELECT $a", {"a": 1}).fetchall()  # from this module's frame
by_others = len(asked) - by_store
store.close()
import json, os.path as p  # other imports, absolute and from-imports, still work
from pybroker import errors
print(by_store, by_others, type(builtins.__import__).__name__, json.__name__, p.sep,
      errors.BrokerError.__name__)
try:
    import pandas
except ModuleNotFoundError as exc:
    print(exc.name)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True, timeout=120).stdout.split()
    assert out == ["0", "2", "builtin_function_or_method", "json", "/", "BrokerError",
                   "pandas"]


@pytest.mark.skipif(HAS_PANDAS, reason="pandas is installed: nothing to short-cut")
def test_the_short_cut_refuses_pandas_alone():
    from pybroker import no_pandas

    fast = no_pandas.builtins_refusing_pandas()
    assert fast is not None and fast["len"] is len
    with pytest.raises(ModuleNotFoundError) as refused:
        fast["__import__"]("pandas")
    assert refused.value.name == "pandas"
    assert fast["__import__"]("json").__name__ == "json"
    assert fast["__import__"]("os.path", fromlist=["join"]).join("a", "b") == "a/b"


VALUES = (st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1)
          | st.floats(allow_nan=False) | st.text() | st.binary(max_size=64))


@pytest.fixture(scope="module")
def store():
    from pybroker.storage import Store

    opened = Store(None)
    yield opened
    opened.close()


@settings(max_examples=200, deadline=None)
@given(value=VALUES)
def test_a_value_bound_through_the_store_comes_back_as_it_went(store, value):
    """Whatever answers DuckDB's look for pandas, a bound value converts as before."""
    back = store.fetchone("SELECT $v", {"v": value})[0]
    assert back == value and type(back) is type(value)
