"""DuckDB's client looks for pandas on every bound parameter; without pandas installed each
look must be answered at once, not by a walk of sys.path (pybroker/no_pandas.py)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

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
