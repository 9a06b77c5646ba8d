"""The DuckDB pipeline and ``pybroker export`` after ``pip install .`` alone: no pyarrow
(it comes with the spark extra). A child process in which ``import pyarrow`` fails runs
every DuckDB job of the command line; then an export that fails part way leaves nothing,
neither the target directory nor its temporary one."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pybroker
from pybroker.apps.pipeline.export import export_instance
from pybroker.apps.pipeline.schema import EXPORTED_TABLES
from pybroker.errors import PipelineError
from pybroker.storage import templates as sql_templates

ROOT = Path(__file__).resolve().parents[1]

# The child: every import of pyarrow (or of a module in it) fails as it does where pyarrow
# is not installed, then the command lines run one after the other in this one process.
CHILD = """
import json, sys

class NoPyarrow:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "pyarrow":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoPyarrow())
try:
    import pyarrow  # noqa: F401
    blocked = False
except ImportError:
    blocked = True

from pybroker.cli.main import main

codes = [main(line) for line in json.loads(sys.argv[1])]
print(json.dumps({"blocked": blocked, "codes": codes,
                  "pyarrow_loaded": any(m.split(".")[0] == "pyarrow" for m in sys.modules)}))
"""


def _rows(path: Path, sql: str = "SELECT * FROM t") -> list[tuple]:
    con = duckdb.connect()
    try:
        files = sorted(path.glob("*.parquet")) if path.is_dir() else [path]
        con.read_parquet([str(f) for f in files]).create_view("t")
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_export_and_every_duckdb_job_run_without_pyarrow(tmp_path):
    file = tmp_path / "broker.duckdb"
    # an instance whose clock stands in 2020: its message has waited years at the export
    with pybroker.connect(file, clock=lambda: 1_600_000_000.0) as inst:
        shop = inst.create_database("Shop")
        shop.create_route("StockRoute", service_name="svc_0000001",
                          address="tcp://stock.example.com:4022")
        shop.create_queue("ShopQueue")
        shop.create_service("ShopService", queue="ShopQueue")
        shop.begin_dialog("ShopService", "Nowhere").send(b"waits")  # DELAYED: no route
    script = tmp_path / "change.sql"
    script.write_text("DROP ROUTE StockRoute\n")
    w, state = tmp_path / "w", tmp_path / "state"
    lines = [
        ["pipeline", "generate", str(w), "--conversations", "1000", "--routes", "10",
         "--seed", "1"],
        ["export", str(file), str(state)],
        ["pipeline", "resolve", str(w), str(w / "conversations.parquet"),
         str(tmp_path / "decisions")],
        ["pipeline", "resolve", str(file), str(w / "conversations.parquet"),
         str(tmp_path / "decisions_file")],
        ["pipeline", "traffic", str(state), str(tmp_path / "traffic")],
        ["pipeline", "impact", str(w), str(w / "conversations.parquet"),
         str(tmp_path / "impact"), "--after", str(state)],
        ["pipeline", "impact", str(file), str(w / "conversations.parquet"),
         str(tmp_path / "impact_script"), "--script", str(script), "-d", "Shop"],
    ]
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(lines)], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["blocked"] is True  # the child really had no pyarrow
    assert result["codes"] == [0] * len(lines), done.stderr
    assert result["pyarrow_loaded"] is False
    assert "pyarrow" not in done.stderr

    assert _rows(w / "conversations.parquet", "SELECT count(*) FROM t") == [(1000,)]
    assert _rows(w / "routes.parquet", "SELECT count(*) FROM t WHERE name LIKE 'Route%'") \
        == [(10,)]
    assert {p.name for p in state.iterdir()} == {
        *(f"{t.name}.parquet" for t in EXPORTED_TABLES), "export_info.parquet"}
    assert _rows(state / "databases.parquet", "SELECT name FROM t ORDER BY name") == [
        ("Shop",), ("master",), ("msdb",)]
    assert _rows(state / "routes.parquet", "SELECT name FROM t WHERE name = 'StockRoute'") \
        == [("StockRoute",)]
    assert _rows(state / "transmission_queue.parquet",
                 "SELECT to_service_name, message_body FROM t") == [("Nowhere", b"waits")]
    con = duckdb.connect()
    info = con.execute("SELECT exported_at, schema_version FROM read_parquet($p)",
                       {"p": str(state / "export_info.parquet")})
    assert [d[1] for d in info.description] == ["TIMESTAMP", "INTEGER"]
    ((exported_at, version),) = info.fetchall()
    con.close()
    with duckdb.connect(str(file), read_only=True) as instance:
        assert version == instance.execute("SELECT max(version) FROM schema_migrations") \
            .fetchone()[0]
    assert _rows(tmp_path / "decisions", "SELECT count(*) FROM t") == [(1000,)]
    assert _rows(tmp_path / "decisions_file", "SELECT count(*) FROM t") == [(1000,)]
    # traffic measured the DELAYED message's wait to the export's time (export_info)
    ((service, enqueued, waited),) = _rows(
        tmp_path / "traffic" / "delayed",
        "SELECT service_name, first_enqueue_time, waited_seconds FROM t")
    assert service == "Nowhere" and waited > 86_400 * 365
    assert waited == int(exported_at.timestamp()) - int(enqueued.timestamp())
    assert (tmp_path / "impact" / "changes").is_dir()
    assert (tmp_path / "impact_script" / "summary").is_dir()


# -- an export is all or nothing --------------------------------------------------------


def _instance(directory: Path) -> Path:
    file = directory / "i.duckdb"
    with pybroker.connect(file) as inst:
        db = inst.create_database("Sales")
        db.create_queue("Q")
        db.create_service("Sender", queue="Q")
        db.begin_dialog("Sender", "Nowhere").send(b"waits")
    return file


@pytest.fixture(scope="module")
def instance_file(tmp_path_factory) -> Path:
    return _instance(tmp_path_factory.mktemp("instance"))


@settings(max_examples=12, deadline=None)
@given(failing_at=st.integers(0, len(EXPORTED_TABLES) - 1), nested=st.booleans())
def test_an_export_failing_part_way_leaves_nothing_behind(instance_file, failing_at, nested):
    render = sql_templates.render
    tables_rendered = []

    def render_failing(name, **variables):
        if name == "pipeline/export_table.sql":
            tables_rendered.append(variables["table"])
            if len(tables_rendered) > failing_at:
                raise duckdb.IOException("IO Error: No space left on device")
        return render(name, **variables)

    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        target = where / "a" / "b" / "state" if nested else where / "state"
        sql_templates.render = render_failing
        try:
            with pytest.raises(PipelineError, match="No space left on device"):
                export_instance(instance_file, target)
        finally:
            sql_templates.render = render
        assert len(tables_rendered) == failing_at + 1  # it failed where it was meant to
        assert list(where.iterdir()) == []  # no target, no temporary directory, no parents


def test_an_export_failing_on_a_bad_table_leaves_nothing_behind(tmp_path):
    file = _instance(tmp_path)
    # the file's last exported table holds a time that is no time: the cast fails there,
    # after every other table was written
    last = EXPORTED_TABLES[-1]
    with duckdb.connect(str(file)) as con:
        con.execute(f"DROP VIEW IF EXISTS sys_{last.name}")
        con.execute(f"CREATE OR REPLACE TABLE {last.name} (enqueue_time VARCHAR)")
        con.execute(f"INSERT INTO {last.name} VALUES ('not a time')")
    out = tmp_path / "out"
    with pytest.raises(PipelineError, match=re.escape(f"cannot export {file}")):
        export_instance(file, out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["i.duckdb"]


def test_an_export_replaces_an_earlier_one_whole_and_keeps_it_on_failure(tmp_path,
                                                                       monkeypatch):
    file = _instance(tmp_path)
    out = tmp_path / "out"
    export_instance(file, out)
    first = {p.name: p.read_bytes() for p in out.iterdir()}
    (out / "transmission_queue.parquet").unlink()  # an earlier export of fewer tables

    def failing(*args, **kwargs):
        raise PipelineError("cannot export: the disk is full")

    monkeypatch.setattr("pybroker.apps.pipeline.export._write_export_info", failing)
    with pytest.raises(PipelineError, match="disk is full"):
        export_instance(file, out)
    assert sorted(p.name for p in out.iterdir()) == sorted(set(first) -
                                                           {"transmission_queue.parquet"})
    monkeypatch.undo()
    export_instance(file, out)
    assert {p.name for p in out.iterdir()} == set(first)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["i.duckdb", "out"]


def test_an_export_refuses_a_directory_holding_other_files(tmp_path):
    file = _instance(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(PipelineError, match=r"holds notes\.txt, which is no file of an export"):
        export_instance(file, out)
    assert [p.name for p in out.iterdir()] == ["notes.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["i.duckdb", "out"]
