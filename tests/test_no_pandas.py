"""DuckDB looks for pandas on every bound value; pybroker's own calls answer the look at
once (no_pandas.call), and nothing else of the process changes: an application that
imports pybroker and then pandas gets pandas (pybroker/storage/no_pandas.py)."""

from __future__ import annotations

import ctypes
import importlib.abc
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pybroker.storage import no_pandas

ROOT = Path(__file__).resolve().parents[1]
HAS_PANDAS = importlib.util.find_spec("pandas") is not None
needs_no_pandas = pytest.mark.skipif(
    HAS_PANDAS, reason="pandas is installed: an application without it cannot be shown")


def _child(script: str, *path: Path) -> dict:
    """Run ``script`` in a new interpreter with ``path`` first on its sys.path; the JSON
    of its last line."""
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join([*(str(p) for p in path), str(ROOT)])}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def _fake_pandas(where: Path) -> Path:
    """A package named pandas, with the two values DuckDB checks a bound value against."""
    package = where / "pandas"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        'MADE_BY = "test_no_pandas"\nNA = object()\nNaT = object()\n', encoding="utf-8")
    return where


# Statements that bind values, as an application makes them through pybroker
_USE_PYBROKER = """
inst = pybroker.connect(None, worker=False)
db = inst.create_database("Shop")
db.create_queue("ShopQueue")
db.create_service("ShopService", queue="ShopQueue", contracts=["DEFAULT"])
conv = db.begin_dialog("ShopService", "ShopService")
conv.send(b"<order/>")
assert db.receive("ShopQueue", max_messages=1)[0].message_body == b"<order/>"
assert inst.sql("SELECT $1 + 1", params=[41]).fetchone() == (42,)
"""


@needs_no_pandas
def test_importing_and_using_pybroker_leaves_the_import_system_as_it_was():
    script = """
import builtins, importlib.machinery, json, sys

def snapshot():
    return {"meta_path": list(sys.meta_path), "path_hooks": list(sys.path_hooks),
            "builtins": dict(vars(builtins)), "modules": dict(sys.modules)}

def changes(then, now):
    return {
        "meta_path": [repr(f) for f in now["meta_path"] if f not in then["meta_path"]]
                     + [repr(f) for f in then["meta_path"] if f not in now["meta_path"]],
        "path_hooks": now["path_hooks"] != then["path_hooks"],
        "builtins": sorted(k for k in then["builtins"].keys() | now["builtins"].keys()
                           if then["builtins"].get(k) is not now["builtins"].get(k)),
        "modules replaced": sorted(k for k, m in then["modules"].items()
                                   if now["modules"].get(k) is not m),
        "modules added as pandas or None": sorted(
            k for k, m in now["modules"].items() if k not in then["modules"]
            and (k.partition(".")[0] == "pandas" or m is None)),
    }

before = snapshot()
import pybroker
after_import = snapshot()
""" + _USE_PYBROKER + """
after_use = snapshot()
own_builtins = sorted(name for name, m in sys.modules.items()
                      if name.partition(".")[0] == "pybroker"
                      and vars(m).get("__builtins__", builtins) not in (builtins, vars(builtins)))
searched = []
path_finder = importlib.machinery.PathFinder.find_spec.__func__
def spy(cls, name, path=None, target=None):
    searched.append(name)
    return path_finder(cls, name, path, target)
importlib.machinery.PathFinder.find_spec = classmethod(spy)
try:
    import pandas
    refused = None
except ModuleNotFoundError as exc:
    refused = exc.name
print(json.dumps({"import": changes(before, after_import), "use": changes(before, after_use),
                  "import hook": builtins.__import__ is vars(builtins)["__import__"],
                  "own builtins": own_builtins, "refused": refused,
                  "searched": searched}))
"""
    out = _child(script)
    unchanged = {"meta_path": [], "path_hooks": False, "builtins": [],
                 "modules replaced": [], "modules added as pandas or None": []}
    assert out["import"] == unchanged
    assert out["use"] == unchanged
    assert out["own builtins"] == []  # no pybroker module imports through other builtins
    # the application's import of pandas fails the normal way: the path was searched
    assert out["refused"] == "pandas" and out["searched"] == ["pandas"]


@pytest.mark.parametrize("when", ["on the path from the start", "put on the path later"])
def test_an_application_using_pybroker_then_importing_pandas_gets_pandas(tmp_path, when):
    fake = _fake_pandas(tmp_path / "site")
    script = """
import json, sys
import pybroker
""" + _USE_PYBROKER + """
imported_by_pybroker = "pandas" in sys.modules
sys.path.insert(0, SITE)  # a no-op when it is there already
import pandas
# DuckDB, under pybroker's calls, finds the same pandas: its NA is NULL
na_is_null = inst.sql("SELECT $1 IS NULL", params=[pandas.NA]).fetchone()[0]
inst.close()
print(json.dumps({"made by": pandas.MADE_BY, "file": pandas.__file__,
                  "imported by pybroker": imported_by_pybroker, "NA is NULL": na_is_null}))
""".replace("SITE", repr(str(fake)))
    if when == "on the path from the start":
        out = _child(script, fake)
    else:
        if HAS_PANDAS:
            pytest.skip("pandas is installed: it would be found before the one put later")
        out = _child(script)
    assert out["made by"] == "test_no_pandas"
    assert Path(out["file"]) == fake / "pandas" / "__init__.py"
    assert out["imported by pybroker"] is False  # pybroker's statements never import it
    assert out["NA is NULL"] is True


@needs_no_pandas
def test_pybrokers_own_statements_never_search_for_pandas():
    """A finder the test puts first on sys.meta_path counts every import of pandas that
    reaches the import machinery: none from pybroker's statements, four (two per value)
    from the same kind of statement made on DuckDB directly."""
    script = """
import json, sys
import duckdb
import pybroker
from pybroker.api.served import rows
from pybroker.storage.store import Store

asked = []
class Spy:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name.partition(".")[0] == "pandas":
            asked.append(name)
        return None
sys.meta_path.insert(0, Spy)
""" + _USE_PYBROKER + """
store = Store(None)
for i in range(20):
    assert store.fetchone("SELECT $a, $b, $c", {"a": i, "b": "x", "c": b"y"}) == (i, "x", b"y")
client = duckdb.connect()
assert rows.relation(client, ["n"], ["INTEGER"], [[1], [2]]).fetchall() == [(1,), (2,)]
by_pybroker = len(asked)
client.execute("SELECT $a, $b", {"a": 1, "b": "x"}).fetchall()
by_duckdb_alone = len(asked) - by_pybroker
store.close()
inst.close()
print(json.dumps({"by pybroker": by_pybroker, "by DuckDB alone": by_duckdb_alone,
                  "pandas imported": "pandas" in sys.modules}))
"""
    assert _child(script) == {"by pybroker": 0, "by DuckDB alone": 4,
                              "pandas imported": False}


# PyImport_ImportModule called from C, as DuckDB calls it: it takes the import hook of the
# Python frame it is called from (a Python function in between would be that frame)
_C_IMPORT = ctypes.pythonapi.PyImport_ImportModule
_C_IMPORT.argtypes = [ctypes.c_char_p]
_C_IMPORT.restype = ctypes.py_object


@pytest.fixture
def pandas_of_the_test():
    """A pandas that a finder first on sys.meta_path makes, counting every import of it
    that reaches the import machinery; sys.modules' pandas, if any, is put back after."""
    held = {k: m for k, m in sys.modules.items() if k.partition(".")[0] == "pandas"}
    for name in held:
        del sys.modules[name]
    asked: list[str] = []

    class Loader(importlib.abc.Loader):
        def create_module(self, spec):
            return None

        def exec_module(self, module):
            module.MADE_BY = "test_no_pandas"

    class Finder:
        @staticmethod
        def find_spec(name, path=None, target=None):
            if name != "pandas":
                return None
            asked.append(name)
            return importlib.util.spec_from_loader(name, Loader())

    sys.meta_path.insert(0, Finder)
    try:
        yield asked
    finally:
        sys.meta_path.remove(Finder)
        for name in [k for k in sys.modules if k.partition(".")[0] == "pandas"]:
            del sys.modules[name]
        sys.modules.update(held)


def test_the_short_cut_refuses_pandas_under_call_until_it_is_imported(pandas_of_the_test):
    asked = pandas_of_the_test
    for name in (b"pandas", b"pandas.core"):
        with pytest.raises(ModuleNotFoundError) as refused:
            no_pandas.call(_C_IMPORT, name)
        assert refused.value.name == "pandas"
    assert asked == []  # answered before the import machinery
    assert no_pandas.call(_C_IMPORT, b"json") is sys.modules["json"]
    assert no_pandas.call(_C_IMPORT, b"os.path") is sys.modules["os.path"]
    assert "pandas" not in sys.modules

    mine = _C_IMPORT(b"pandas")  # outside call: the process's own import, as ever
    assert mine.MADE_BY == "test_no_pandas" and asked == ["pandas"]
    assert no_pandas.call(_C_IMPORT, b"pandas") is mine  # imported: handed on


def test_call_is_the_call_it_is_given():
    assert no_pandas.call(divmod, 7, 2) == (3, 1)
    assert no_pandas.call(sorted, [3, 1, 2], reverse=True) == [3, 2, 1]
    with pytest.raises(ZeroDivisionError):
        no_pandas.call(divmod, 1, 0)


def test_a_missing_table_is_missing_whatever_its_name():
    """DuckDB looks for a table name it does not know among the calling frame's names:
    ``call``'s frame offers none that a query would name."""
    import pybroker

    with pybroker.connect(None, worker=False) as inst:
        for name in ("function", "args", "kwargs", "time", "duckdb"):
            with pytest.raises(pybroker.InvalidArgumentError) as failed:
                inst.sql(f"SELECT * FROM {name}")
            assert f"Table with name {name} does not exist" in str(failed.value)


VALUES = (st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1)
          | st.floats(allow_nan=False) | st.text() | st.binary(max_size=64))


@pytest.fixture(scope="module")
def store():
    from pybroker.storage.store import Store

    opened = Store(None)
    yield opened
    opened.close()


@settings(max_examples=200, deadline=None)
@given(value=VALUES)
def test_a_value_bound_through_the_store_comes_back_as_it_went(store, value):
    """Whatever answers DuckDB's look for pandas, a bound value converts as before."""
    back = store.fetchone("SELECT $v", {"v": value})[0]
    assert back == value and type(back) is type(value)


def test_importing_pybroker_loads_none_of_the_heavy_libraries_it_uses_later():
    # sqlglot (ordinary SQL in batches, the Spark templates), cryptography (the wire's
    # certificates) and pyspark come with the first call that needs them: a script that
    # only routes, or a CLI command that only reads, never pays for them
    import subprocess
    import sys

    code = ("import sys, pybroker; print(sorted(m for m in ('sqlglot', 'cryptography', "
            "'pyspark', 'pandas') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)
    assert done.stdout.strip() == "[]", done.stdout
