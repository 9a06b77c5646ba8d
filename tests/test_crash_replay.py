"""A process killed at any instant never leaves an instance file that will not open.

- every migration the runner applies, and every catalog definition an open installs, is
  applied in a process SIGKILLed before any checkpoint, and the file then opens in bare
  DuckDB (its write-ahead log replays): a new migration in a form DuckDB 1.5.6 cannot
  replay fails here, not in a user's hands;
- every DDL template of sql/ is either among those, or runs where there is no log;
- the logs an earlier pybroker left unreplayable (012's ADD COLUMN ... DEFAULT nextval) are
  recovered with everything they hold; a log beside the migration marker that replays in
  no way is set aside and the migrations done again; any other is refused, saying so;
- a short fixed-seed run of `pybroker chaos crash`, whose checker is shown to fail.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pybroker
from pybroker.devtools.chaos import crash
from pybroker.errors import StorageError
from pybroker.storage import recovery as storage_recovery
from pybroker.storage import templates as sql_templates
from pybroker.storage.resources import sql_dir
from pybroker.storage.schema import (
    available_migrations,
    catalog_definitions,
    superseded_migrations,
)
from pybroker.timestamps import utc_now

ROOT = Path(__file__).resolve().parents[1]

# apply argv[2:] (statement files) in one transaction each, then SIGKILL: no checkpoint
_APPLY_AND_DIE = r"""
import os, signal, sys
import duckdb
con = duckdb.connect(sys.argv[1])
for name in sys.argv[2:]:
    con.execute("BEGIN TRANSACTION")
    con.execute(open(name, encoding="utf-8").read())
    con.execute("COMMIT")
os.kill(os.getpid(), signal.SIGKILL)
"""


def _apply_and_die(path: Path, *statements: str) -> None:
    files = []
    for n, text in enumerate(statements):
        file = path.with_name(f"{path.name}.stmt{n}.sql")
        file.write_text(text, encoding="utf-8")
        files.append(str(file))
    proc = subprocess.run([sys.executable, "-c", _APPLY_AND_DIE, str(path), *files],
                          capture_output=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    assert Path(f"{path}.wal").exists()  # the kill left the work in the log only


def _opens_in_bare_duckdb(path: Path) -> None:
    con = duckdb.connect(str(path))
    con.close()


def _seed_rows(con: duckdb.DuckDBPyConnection) -> None:
    """One row in each empty table, of values of its columns' types: a migration that
    rewrites or adds a column meets rows, as it does in users' files."""
    samples = {"VARCHAR": "x", "INTEGER": 1, "BIGINT": 1, "SMALLINT": 1, "BOOLEAN": True,
               "TIMESTAMP": utc_now(), "BLOB": b"\x00b", "DOUBLE": 1.5, "UUID": None,
               "TIMESTAMP WITH TIME ZONE": None}
    tables = con.execute("SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main' "
                         "AND NOT internal ORDER BY 1").fetchall()
    for (table,) in tables:
        if con.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]:
            continue
        columns = con.execute("SELECT column_name, data_type FROM duckdb_columns() "
                              "WHERE table_name = $t ORDER BY column_index",
                              {"t": table}).fetchall()
        names = ", ".join(f'"{c}"' for c, _ in columns)
        marks = ", ".join("?" for _ in columns)
        with contextlib.suppress(duckdb.Error):  # a CHECK, a type without a sample: empty
            con.execute(f'INSERT INTO "{table}" ({names}) VALUES ({marks})',
                        [samples.get(t, "1") for _, t in columns])


def _file_at(path: Path, versions: list[int], *, rows: bool = True) -> Path:
    """A checkpointed file with the migrations ``versions`` applied (rows seeded after
    each, so later ones meet them)."""
    by_version = {v: source for v, _n, source in available_migrations()}
    con = duckdb.connect(str(path))
    try:
        for version in versions:
            _apply_one(con, version, by_version[version], rows=rows)
        con.execute("CHECKPOINT")
    finally:
        con.close()
    return path


def _apply_one(con: duckdb.DuckDBPyConnection, version: int, source: Path, *,
               rows: bool = True) -> None:
    """Migration ``version`` in one transaction, then (``rows``) rows seeded if it is
    past those DuckDB commits only on empty tables."""
    con.execute("BEGIN TRANSACTION")
    con.execute(source.read_text(encoding="utf-8"))
    con.execute("INSERT INTO schema_migrations VALUES (?, ?, ?)",
                [version, f"m{version}", utc_now()])
    con.execute("COMMIT")
    if rows and version >= max(WITHOUT_ROWS):  # no rows before those
        _seed_rows(con)


APPLIED = [v for v, _n, _s in available_migrations() if v not in superseded_migrations()]
# migrations that DuckDB 1.5.6 will not commit on a file whose tables have rows, checked
# for replay on empty tables: 002 and 006 add several columns with defaults to
# service_queues in one transaction ("another transaction has altered this table")
WITHOUT_ROWS = {2, 6}


@pytest.fixture(scope="module")
def file_before(tmp_path_factory):
    """``file_before(version)``: a copy, at ``path``, of the file ``_file_at`` makes with
    every applied migration before ``version``; the files are made once per module, each
    from the one before it (one more migration, its rows seeded as ``_file_at`` does)."""
    folder = tmp_path_factory.mktemp("before")
    made: dict[int, Path] = {0: _file_at(folder / "at0.duckdb", [])}

    def at(count: int) -> Path:
        if count not in made:
            previous = at(count - 1)
            version = APPLIED[count - 1]
            path = folder / f"at{count}.duckdb"
            shutil.copyfile(previous, path)
            by_version = {v: source for v, _n, source in available_migrations()}
            con = duckdb.connect(str(path))
            try:
                _apply_one(con, version, by_version[version])
                con.execute("CHECKPOINT")
            finally:
                con.close()
            made[count] = path
        return made[count]

    def copy(version: int, path: Path) -> Path:
        shutil.copyfile(at(APPLIED.index(version)), path)
        return path

    return copy


@pytest.mark.parametrize("version", APPLIED)
def test_each_migration_replays_after_a_kill(tmp_path, file_before, version):
    path = file_before(version, tmp_path / "i.duckdb")
    source = {v: s for v, _n, s in available_migrations()}[version]
    _apply_and_die(path, source.read_text(encoding="utf-8")
                   + f"\n;INSERT INTO schema_migrations VALUES ({version}, 'm', now()::TIMESTAMP)")
    _opens_in_bare_duckdb(path)  # strict: no recovery of ours
    con = duckdb.connect(str(path))
    assert con.execute("SELECT max(version) FROM schema_migrations").fetchone() == (version,)
    con.close()
    with pybroker.connect(path, worker=False) as inst:  # and the file is an instance
        assert inst.sql("SELECT max(version) FROM schema_migrations").fetchone() == (
            APPLIED[-1],)


def test_the_replay_check_fails_on_a_form_duckdb_cannot_replay(tmp_path):
    # the check above can fail: 012 as it landed, on a file at 011, does not replay
    path = _file_at(tmp_path / "i.duckdb", [v for v in APPLIED if v <= 11])
    source = {v: s for v, _n, s in available_migrations()}[12]
    _apply_and_die(path, source.read_text(encoding="utf-8"))
    with pytest.raises(duckdb.Error, match="replaying WAL"):
        _opens_in_bare_duckdb(path)


CATALOG = sorted(p.name for p in (sql_dir() / "catalog").glob("*.sql")
                 if not p.name.startswith("_"))  # jinja macros the others import


def test_the_schema_of_the_definitions_replays_after_a_kill(tmp_path):
    path = _file_at(tmp_path / "i.duckdb", APPLIED)  # the tables, no sys schema yet
    _apply_and_die(path, "CREATE SCHEMA IF NOT EXISTS sys")
    _opens_in_bare_duckdb(path)


def test_every_catalog_definition_replays_after_a_kill(tmp_path):
    # each definition in a transaction of its own, as a kill after its COMMIT leaves it;
    # the reopen replays them all, in order (a failure here: apply them one per file to
    # find which)
    path = tmp_path / "i.duckdb"
    pybroker.connect(path, worker=False).close()
    _apply_and_die(path, *(sql_templates.render(f"catalog/{name}") for name in CATALOG))
    _opens_in_bare_duckdb(path)
    con = duckdb.connect(str(path))
    views = {name for (name,) in con.execute(
        "SELECT view_name FROM duckdb_views() WHERE schema_name = 'sys'").fetchall()}
    con.close()
    assert {"routes", "databases", "queue_messages", "transmission_queue"} <= views


def test_the_definitions_of_an_open_are_all_checked_above():
    assert len(catalog_definitions()) == 1 + len(CATALOG)


# DDL templates of sql/ that never run on an instance file, and so write no log that must
# replay: the pipeline's engine works in an in-memory DuckDB (apps/pipeline/engine.py
# DuckDBEngine), the benches on scratch databases of their own, the ATTACH of a
# replay is the recovery itself, and a snapshot's ATTACH writes only its new file
# (checkpointed before it is detached: storage/snapshot.py)
NO_LOG = re.compile(
    r"^(pipeline/duckdb__|bench/|instance/attach_for_replay\.sql$|instance/attach_snapshot\.sql$)")
_DDL = re.compile(r"^\s*(CREATE|ALTER|DROP|ATTACH)\b", re.IGNORECASE | re.MULTILINE)


def test_every_ddl_template_is_checked_for_replay_or_runs_without_a_log():
    root = sql_dir()
    ddl = sorted(str(p.relative_to(root)) for p in root.rglob("*.sql")
                 if _DDL.search(re.sub(r"--[^\n]*|\{#.*?#\}", "", p.read_text(),
                                       flags=re.DOTALL)))
    unchecked = [name for name in ddl
                 if not name.startswith("catalog/") and not NO_LOG.match(name)]
    assert unchecked == []
    assert any(name.startswith("pipeline/") for name in ddl)  # the scan finds DDL


def test_the_pipeline_engine_runs_in_memory():
    from pybroker.apps.pipeline.engine import DuckDBEngine

    engine = DuckDBEngine(memory_limit="256MiB")
    try:
        row = engine.con.execute(
            "SELECT path FROM duckdb_databases() WHERE database_name = current_database()"
        ).fetchone()
        assert row == (None,)
    finally:
        engine.close()


# -- logs an earlier pybroker left ------------------------------------------------------


@pytest.fixture(scope="module")
def earlier(tmp_path_factory):
    return crash.fixtures(tmp_path_factory.mktemp("fixtures"))


def _copy(source: Path, target: Path) -> Path:
    shutil.copyfile(source, target)
    if Path(f"{source}.wal").exists():
        shutil.copyfile(f"{source}.wal", f"{target}.wal")
    return target


@pytest.mark.parametrize("kind", ["killed-new", "killed-upgrade"])
def test_a_log_an_earlier_pybroker_left_unreplayable_is_recovered_whole(
        tmp_path, earlier, kind):
    path = _copy(earlier[kind], tmp_path / "i.duckdb")
    with pytest.raises(duckdb.Error, match="replaying WAL"):
        _opens_in_bare_duckdb(path)
    with pybroker.connect(path, worker=False) as inst:
        names = {d.name for d in inst.databases()}
        piece_id = inst.sql(
            "SELECT column_default FROM duckdb_columns() WHERE table_name = "
            "'message_fragments' AND column_name = 'piece_id'").fetchall()
        indexes = inst.sql("SELECT index_name FROM duckdb_indexes() "
                           "WHERE table_name = 'message_fragments'").fetchall()
    assert "Kept" in names  # committed after the migrations, in the same log
    assert piece_id == [(None,)] and indexes == [("message_fragments_piece_id",)]
    _opens_in_bare_duckdb(path)  # the replay was checkpointed into the file


@pytest.mark.parametrize("kind", ["v011", "v012", "v012+index", "v013", "v005"])
def test_each_earlier_schema_version_upgrades_to_the_same_end(tmp_path, earlier, kind):
    path = _copy(earlier[kind], tmp_path / "i.duckdb")
    with pybroker.connect(path, worker=False) as inst:
        shape = inst.sql(
            "SELECT column_name, data_type, column_default FROM duckdb_columns() "
            "WHERE table_name = 'message_fragments' ORDER BY column_index").fetchall()
        indexes = inst.sql("SELECT index_name, is_unique FROM duckdb_indexes() "
                           "WHERE table_name = 'message_fragments'").fetchall()
    with pybroker.connect(tmp_path / "new.duckdb", worker=False) as inst:
        assert shape == inst.sql(
            "SELECT column_name, data_type, column_default FROM duckdb_columns() "
            "WHERE table_name = 'message_fragments' ORDER BY column_index").fetchall()
    assert indexes == [("message_fragments_piece_id", True)]


def test_a_log_beside_the_marker_that_replays_in_no_way_is_set_aside(
        tmp_path, earlier, monkeypatch):
    # a kill inside an open's schema work, in a form that replays neither directly nor
    # attached: the marker proves the log holds that work only, which is done again
    path = _copy(earlier["killed-upgrade"], tmp_path / "i.duckdb")
    storage_recovery.marker_path(path).write_text(json.dumps({"schema_version": 11}))

    def no_replay(target: Path) -> None:
        raise duckdb.InternalException("Failure while replaying WAL file (simulated)")

    monkeypatch.setattr(storage_recovery, "replay_apart", no_replay)
    with pybroker.connect(path, worker=False) as inst:
        names = {d.name for d in inst.databases()}
        version = inst.sql("SELECT max(version) FROM schema_migrations").fetchone()
    assert names == {"master", "msdb"}  # the checkpointed file at 011: its 'Kept' was
    assert version == (APPLIED[-1],)  # ... in the log of the (simulated) schema work
    for leftover in (storage_recovery.marker_path(path),
                     Path(f"{path}{storage_recovery.ASIDE_SUFFIX}")):
        assert not leftover.exists()
    _opens_in_bare_duckdb(path)


def test_a_log_of_an_application_that_replays_in_no_way_is_refused_and_kept(
        tmp_path, earlier, monkeypatch):
    path = _copy(earlier["killed-new"], tmp_path / "i.duckdb")
    log = Path(f"{path}.wal").read_bytes()
    main = path.read_bytes()

    def no_replay(target: Path) -> None:
        raise duckdb.InternalException("Failure while replaying WAL file (simulated)")

    monkeypatch.setattr(storage_recovery, "replay_apart", no_replay)
    with pytest.raises(StorageError) as caught:
        pybroker.connect(path, worker=False)
    message = str(caught.value)
    assert f"{path}.wal" in message and "cannot replay" in message
    assert "nothing was changed" in message and "damaged" not in message
    assert Path(f"{path}.wal").read_bytes() == log and path.read_bytes() == main


def test_a_read_only_open_of_an_unreplayable_log_says_to_open_for_writing(tmp_path, earlier):
    path = _copy(earlier["killed-new"], tmp_path / "i.duckdb")
    with pytest.raises(StorageError, match="open it once for writing"):
        pybroker.connect(path, read_only=True)
    with pybroker.connect(path, worker=False) as inst:
        assert "Kept" in {d.name for d in inst.databases()}
    with pybroker.connect(path, read_only=True) as inst:
        assert "Kept" in {d.name for d in inst.databases()}


def test_an_open_that_changes_nothing_writes_nothing(tmp_path):
    path = tmp_path / "i.duckdb"
    pybroker.connect(path, worker=False).close()
    before = path.read_bytes()
    with pybroker.connect(path, worker=False) as inst:
        assert inst.sql("SELECT count(*) FROM sys.databases").fetchone() == (2,)
    assert path.read_bytes() == before
    assert not storage_recovery.marker_path(path).exists()


@settings(max_examples=25, deadline=None)
@given(st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00/"),
               min_size=1, max_size=30))
def test_the_attach_of_a_replay_takes_any_file_name(tmp_path_factory, name):
    directory = tmp_path_factory.mktemp("names")
    path = directory / f"{name}.duckdb"
    try:
        duckdb.connect(str(path)).execute("CREATE TABLE t (a INT)").close()
    except (duckdb.Error, OSError, UnicodeError):
        return  # a name the file system or DuckDB itself refuses
    storage_recovery.replay_apart(path)
    assert duckdb.connect(str(path)).execute("SELECT count(*) FROM t").fetchone() == (0,)


# -- the kill test ----------------------------------------------------------------------


def test_the_crash_checker_fails_on_what_was_not_committed():
    before = crash.Model(databases={"Src", "Dst"}, services={"Src", "Dst"})
    sent = [{"intent": {"op": "send", "body": "b1"}}, {"done": {"op": "send", "body": "b1"}}]
    crash.check(before, sent, crash.Model({"Src", "Dst"}, {}, {"b1"}, set(), {"Src", "Dst"}))
    with pytest.raises(crash.CrashViolation, match="neither queued nor received"):
        crash.check(before, sent, crash.Model({"Src", "Dst"}, {}, set(), set(),
                                              {"Src", "Dst"}))
    cut = [{"intent": {"op": "database", "name": "D1"}}]
    for got in ({"Src", "Dst"}, {"Src", "Dst", "D1"}):  # under way: either
        crash.check(before, cut, crash.Model(got, {}, set(), set(), {"Src", "Dst"}))
    with pytest.raises(crash.CrashViolation, match="databases"):
        crash.check(before, cut, crash.Model({"Src", "Dst", "D2"}, {}, set(), set(),
                                             {"Src", "Dst"}))
    route = [{"intent": {"op": "route", "name": "CrashRoute1", "address": "tcp://a:1"}},
             {"done": {"op": "route", "name": "CrashRoute1", "address": "tcp://a:1"}},
             {"intent": {"op": "alter_route", "name": "CrashRoute1", "address": "tcp://b:1"}}]
    for address in ("tcp://a:1", "tcp://b:1"):
        crash.check(before, route, crash.Model({"Src", "Dst"}, {"CrashRoute1": address},
                                               set(), set(), {"Src", "Dst"}))
    with pytest.raises(crash.CrashViolation, match="routes"):
        crash.check(before, route, crash.Model({"Src", "Dst"}, {}, set(), set(),
                                               {"Src", "Dst"}))


SHORT_SEED = 32  # its ten rounds: every kind of start, five kills counted from "start"


def test_a_short_crash_run_is_valid(tmp_path):
    # `pybroker chaos crash` with a fixed seed: kills inside connect() of new files, inside
    # upgrades from earlier versions and from a log an earlier pybroker left, and among
    # the operations
    drawn = crash.plan(10, SHORT_SEED, list(crash.fixtures(tmp_path / "plan")))
    assert {r.start for r in drawn} == {"new", "upgrade", "continue"}
    assert "killed-new" in {r.fixture for r in drawn}
    assert sum(r.start != "continue" and r.after == "start" for r in drawn) == 5
    report = crash.run(10, SHORT_SEED, tmp_path / "run").as_dict()
    assert report["violations"] == []
    assert report["rounds"] == 10
    assert report["killed_in_open"] >= 1  # a new file's connect() takes longer than 0.1 s
    assert report["operations_done"] >= 5  # the kills counted from "opened" come later


def test_chaos_crash_command(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "pybroker", "chaos", "crash", "--rounds", "2", "--seed", "5",
         "--dir", str(tmp_path / "run"), "--json"],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    assert report["valid"] and report["rounds"] == 2
