"""Every instance file any landed pybroker made opens with today's code, at today's shape.

tests/fixtures/landed_migrations/ holds each set of migrations/ as it stood on main after
each commit that changed it (its README.md says which commits). For each set, and for a
file made by one set and then upgraded by a later one, a file is built in bare DuckDB the
way that pybroker's runner built it (each migration in a transaction of its own with its
row in schema_migrations; a migration that failed stopped the runner), given real objects
through the columns its tables had (a database with its AutoCreatedLocal route, a queue and
a service, a conversation with a message in the queue, one waiting in the transmission
queue, a fragment held for reassembly), checkpointed and closed. Then ``pybroker.connect``
opens it: it reaches today's newest schema version, its tables, columns, constraints and
indexes are those of a new file, the objects are all there, the message is received, and
the instance works. There is no intended difference: every landed state reaches a new
file's shape (migrations 017 and 018 rebuild message_fragments from the two that did not).

A file of schema 5 or less whose queues table has rows: DuckDB 1.5.6 refuses 002 and 006 as
written (they add columns with defaults to service_queues); the runner then applies them
in the form pybroker/storage/migration_defaults.py gives, and a kill after that commits leaves a
file whose log replays in bare DuckDB and whose next open finishes the upgrade.

The views and macros of sql/catalog/ are not built here: an open replaces them whenever
the file's are not its own (pybroker/storage/store.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

import pybroker
from pybroker.storage.resources import migrations_dir
from pybroker.storage.schema import available_migrations
from pybroker.timestamps import utc_now

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "landed_migrations"
MANIFEST = json.loads((FIXTURES / "manifest.json").read_text(encoding="utf-8"))
SETS: list[dict] = MANIFEST["sets"]
_NAME = re.compile(r"^(\d{3})_([a-z0-9_]+)\.sql$")
_SUPERSEDES = re.compile(r"^--\s*supersedes:\s*(\d{3}(?:\s*,\s*\d{3})*)\s*$")
MIGRATIONS = migrations_dir()
KEPT = 5  # the database id of the objects the files are given (after master 1, msdb 4)
BODY = b"kept through every upgrade"


def _text_path(name: str, sha: str) -> Path:
    """Where a landed text is: migrations/ itself while it holds that text byte for byte
    (a landed migration is never edited), else the copy carried in texts/ (the texts that
    were edited after they landed, and the superseded wip one)."""
    today = MIGRATIONS / name
    if today.exists() and hashlib.sha256(today.read_bytes()).hexdigest() == sha:
        return today
    return FIXTURES / "texts" / f"{name[:-4]}.{sha[:12]}.sql"


def _migrations(landed: dict) -> list[tuple[int, str, str, str]]:
    """A landed set's migrations in order: (version, name, text, sha256)."""
    found = []
    for file, sha in sorted(landed["files"].items()):
        match = _NAME.match(file)
        assert match, file
        found.append((int(match.group(1)), match.group(2),
                      _text_path(file, sha).read_text(encoding="utf-8"), sha))
    return found


def _run_by(landed: dict, current: int) -> list[tuple[int, str, str, str]]:
    """What that set's runner applied to a file at ``current``: every later migration,
    except those a migration of the set supersedes (the runner knew of none before 014)."""
    migrations = _migrations(landed)
    superseded: set[int] = set()
    for _version, _name, text, _sha in migrations:
        match = _SUPERSEDES.match(text.partition("\n")[0])
        if match:
            superseded.update(int(n) for n in match.group(1).split(","))
    return [m for m in migrations if m[0] > current and m[0] not in superseded]


def _histories() -> dict[str, tuple[dict, ...]]:
    """Each landed set alone, and each set followed by a later one (a file its pybroker
    made, upgraded by a later pybroker before today's) when that applies texts no set
    alone applies (010 as first landed, then 011...; 012 as it first landed, then 013)."""
    found: dict[str, tuple[dict, ...]] = {}
    seen: set[tuple] = set()
    chains = [(landed,) for landed in SETS] + [
        (first, then) for i, first in enumerate(SETS) for then in SETS[i + 1:]]
    for chain in chains:
        applied, current = [], 0
        for landed in chain:
            applied += [(v, sha) for v, _n, _t, sha in _run_by(landed, current)]
            current = max(v for v, _ in applied)
        if tuple(applied) not in seen:
            seen.add(tuple(applied))
            found["+".join(landed["commit"][:7] for landed in chain)] = chain
    return found


HISTORIES = _histories()


def test_the_fixtures_are_the_texts_their_manifest_names():
    used = set()
    for landed in SETS:
        for file, sha in landed["files"].items():
            path = _text_path(file, sha)
            assert hashlib.sha256(path.read_bytes()).hexdigest() == sha, path
            used.add(path)
    # texts/ carries only what migrations/ no longer holds, each used
    assert {p for p in used if p.parent.name == "texts"} == set(
        (FIXTURES / "texts").glob("*.sql"))
    # a later set's files, each as the set before held it or new: the history is whole
    versions = [len(landed["files"]) for landed in SETS]
    assert versions == sorted(versions) and versions[0] == 1


def test_no_landed_migration_is_edited():
    # the newest landed set is in migrations/ byte for byte; today's may add to it
    newest = SETS[-1]["files"]
    today = {path.name: hashlib.sha256(path.read_bytes()).hexdigest()
             for _v, _n, path in available_migrations()}
    changed = sorted(name for name, sha in newest.items() if today.get(name) != sha)
    assert not changed, (
        f"migrations {changed} differ from the texts that landed (tests/fixtures/"
        "landed_migrations): a landed migration is never edited, a change is a new one")


# -- the files --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    """Objects made by today's code, whose rows each old file is given through the columns
    its own tables have: database KEPT with its route, queue and service, a conversation
    with a message in the queue, another with a message waiting in the transmission queue
    (no route to its service), and a fragment held for reassembly."""
    path = tmp_path_factory.mktemp("source") / "source.duckdb"
    with pybroker.connect(path, worker=False) as inst:
        db = inst.create_database("Kept")
        assert db.database_id == KEPT
        db.create_queue("KeptQueue")
        db.create_service("KeptService", queue="KeptQueue", contracts=["DEFAULT"])
        db.begin_dialog("KeptService", "KeptService").send(BODY)
        db.begin_dialog("KeptService", "FarService").send(b"waiting for a route")
    con = duckdb.connect(str(path))
    try:
        columns = _columns(con, "message_fragments")
        values = {"database_id": KEPT, "conversation_handle": "held-fragment",
                  "message_sequence_number": 0, "fragment_number": 1, "piece_number": 0,
                  "fragment_count": 2, "message_size": 6, "message_type_name": "DEFAULT",
                  "validation": "N", "is_end_of_dialog": False,
                  "is_conversation_error": False, "message_body": b"held",
                  "arrival_time": utc_now(), "piece_id": 1}
        assert set(values) == set(columns)  # a new column wants a value here
        con.execute(f"INSERT INTO message_fragments ({', '.join(values)}) "
                    f"VALUES ({', '.join('?' for _ in values)})", list(values.values()))
        con.execute("CHECKPOINT")
    finally:
        con.close()
    return path


def _columns(con: duckdb.DuckDBPyConnection, table: str, database: str | None = None
             ) -> list[str]:
    return [row[0] for row in con.execute(
        "SELECT column_name FROM duckdb_columns() WHERE table_name = $t AND "
        "schema_name = 'main' AND database_name = coalesce($d, current_database()) "
        "ORDER BY column_index", {"t": table, "d": database}).fetchall()]


def _tables(con: duckdb.DuckDBPyConnection, database: str | None = None) -> list[str]:
    return [row[0] for row in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main' AND "
        "database_name = coalesce($d, current_database()) ORDER BY 1",
        {"d": database}).fetchall()]


def _kept_rows(con: duckdb.DuckDBPyConnection, table: str, columns: list[str],
               database: str | None = None) -> list[tuple]:
    names = ", ".join(f'"{c}"' for c in columns)
    where = f'"{database}".main."{table}"' if database else f'"{table}"'
    return sorted(con.execute(f"SELECT {names} FROM {where} WHERE database_id = {KEPT}"
                              ).fetchall(), key=repr)


# columns the file numbers from a sequence of its own: a copied row takes the file's next
SEQUENCED = {("routes", "route_id"): "route_id_seq",
             ("message_fragments", "piece_id"): "message_fragment_piece_ids"}


def _give_objects(con: duckdb.DuckDBPyConnection, source: Path) -> dict[str, list]:
    """Copy the source's rows of database KEPT into every table the file has, through
    the columns the file's table has; returns what the file then holds of them, per table
    (its columns, its rows)."""
    con.execute(f"ATTACH '{source}' AS source (READ_ONLY)")  # a path of the test's own
    given: dict[str, list] = {}
    try:
        source_tables = set(_tables(con, "source"))
        for table in _tables(con):
            if table not in source_tables:
                continue
            source_columns = set(_columns(con, table, "source"))
            columns = [c for c in _columns(con, table) if c in source_columns]
            if "database_id" not in columns or not _kept_rows(con, table, columns, "source"):
                continue
            names = ", ".join(f'"{c}"' for c in columns)
            values = ", ".join(
                f"nextval('{SEQUENCED[table, c]}')" if (table, c) in SEQUENCED else f'"{c}"'
                for c in columns)
            con.execute(f'INSERT INTO "{table}" ({names}) SELECT {values} '
                        f'FROM source.main."{table}" WHERE database_id = {KEPT}')
            given[table] = [columns, _kept_rows(con, table, columns)]
    finally:
        con.execute("DETACH source")
    return given


def _apply(con: duckdb.DuckDBPyConnection, migrations: list[tuple[int, str, str, str]]
           ) -> str | None:
    """Apply as the runner of the time did; the first failure stops it (its message)."""
    for version, name, text, _sha in migrations:
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute(text)
            con.execute("INSERT INTO schema_migrations VALUES (?, ?, ?)",
                        [version, name, utc_now()])
            con.execute("COMMIT")
        except duckdb.Error as exc:
            with contextlib.suppress(duckdb.Error):  # DuckDB may have ended it already
                con.execute("ROLLBACK")
            return f"{version:03d}: {exc}"
    return None


def _version(con: duckdb.DuckDBPyConnection) -> int:
    return con.execute("SELECT max(version) FROM schema_migrations").fetchone()[0]


def _build(path: Path, chain: tuple[dict, ...], source: Path, *, objects: bool = True
           ) -> tuple[dict[str, list], list[str]]:
    """A checkpointed file made by ``chain``'s pybrokers in turn, the objects given after
    the first; returns what was given and what each later runner refused."""
    con = duckdb.connect(str(path))
    refused = []
    try:
        failed = _apply(con, _run_by(chain[0], 0))
        assert failed is None, failed  # a new file: every set's migrations run
        given = _give_objects(con, source) if objects else {}
        for landed in chain[1:]:
            failed = _apply(con, _run_by(landed, _version(con)))
            if failed:
                refused.append(failed)
        con.execute("CHECKPOINT")
    finally:
        con.close()
    return given, refused


# -- what today's code must make of them ---------------------------------------------------


def _shape(con: duckdb.DuckDBPyConnection) -> dict[str, list]:
    """Tables, columns, constraints, indexes and sequences of the file's main schema."""
    return {
        "columns": con.execute(
            "SELECT table_name, column_index, column_name, data_type, column_default, "
            "is_nullable FROM duckdb_columns() WHERE schema_name = 'main' "
            "AND database_name = current_database() ORDER BY table_name, column_index"
        ).fetchall(),
        "constraints": sorted(((t, kind, tuple(names), expression) for t, kind, names,
                               expression in con.execute(
            "SELECT table_name, constraint_type, constraint_column_names, expression "
            "FROM duckdb_constraints() WHERE schema_name = 'main' "
            "AND database_name = current_database()").fetchall()), key=repr),
        "indexes": con.execute(
            "SELECT table_name, index_name, is_unique, sql FROM duckdb_indexes() "
            "WHERE schema_name = 'main' AND database_name = current_database() "
            "ORDER BY table_name, index_name").fetchall(),
        "sequences": con.execute(
            "SELECT sequence_name FROM duckdb_sequences() WHERE schema_name = 'main' "
            "AND database_name = current_database() ORDER BY 1").fetchall(),
    }


@pytest.fixture(scope="module")
def new_shape(tmp_path_factory) -> dict[str, list]:
    path = tmp_path_factory.mktemp("new") / "new.duckdb"
    pybroker.connect(path, worker=False).close()
    con = duckdb.connect(str(path))
    try:
        return _shape(con)
    finally:
        con.close()


NEWEST = available_migrations()[-1][0]


@pytest.mark.parametrize("history", list(HISTORIES))
def test_a_file_of_each_landed_set_opens_at_todays_shape_with_its_objects(
        tmp_path, source, new_shape, history):
    chain = HISTORIES[history]
    path = tmp_path / "i.duckdb"
    given, _refused = _build(path, chain, source)
    made_at = len(chain[0]["files"])
    assert {"databases", "routes", "service_queues", "services"} <= set(given)
    assert made_at < 2 or {"conversation_endpoints", "queue_messages",
                           "transmission_queue"} <= set(given)
    assert made_at < 3 or "message_fragments" in given

    with pybroker.connect(path, worker=False) as inst:
        assert inst.sql("SELECT max(version) FROM schema_migrations").fetchone() == (NEWEST,)
        db = inst.database("Kept")
        assert [r.name for r in db.routes()] == ["AutoCreatedLocal"]
        assert [q.name for q in db.queues()] == ["KeptQueue"]
        assert [(s.name, s.queue) for s in db.services()] == [("KeptService", "KeptQueue")]
        if "queue_messages" in given:
            [message] = db.receive("KeptQueue")
            assert message.message_body == BODY
            given.pop("queue_messages")  # received
    con = duckdb.connect(str(path))
    try:
        shape = _shape(con)
        for part, new in new_shape.items():
            assert (sorted(set(shape[part]) - set(new), key=repr),
                    sorted(set(new) - set(shape[part]), key=repr)) == ([], []), part
            assert shape[part] == new, part  # and in the same order
        for table, (columns, rows) in given.items():
            assert _kept_rows(con, table, columns) == rows, table
    finally:
        con.close()
    # and it works as a new file does (its engine then also retries the kept conversation
    # whose service has no route: the rows compared above are as the upgrade left them)
    with pybroker.connect(path, worker=False) as inst:
        after = inst.create_database("After")
        after.create_queue("q")
        after.create_service("s", queue="q", contracts=["DEFAULT"])
        after.begin_dialog("s", "s").send(b"after the upgrade")
        assert [m.message_body for m in after.receive("q")] == [b"after the upgrade"]


# -- a file of schema 5 or less whose queues table has rows ---------------------------------

BY_COMMIT = {landed["commit"][:7]: landed for landed in SETS}


def test_duckdb_refuses_006_as_written_on_a_file_whose_queues_table_has_rows(
        tmp_path, source):
    # what the runner's split form (pybroker/storage/migration_defaults.py) is for: as written,
    # 006 fails on such a file, as 002 does on a file of 001
    for made_by, then in (("33a620e", "c937506"), ("f5a6e37", "74412ce")):
        path = tmp_path / f"{made_by}.duckdb"
        given, refused = _build(path, (BY_COMMIT[made_by], BY_COMMIT[then]), source)
        assert "service_queues" in given
        [failure] = refused
        assert "another transaction has altered this table" in failure, failure
        assert failure.startswith(f"{len(BY_COMMIT[made_by]['files']) + 1:03d}: ")


def test_a_migration_refused_in_both_forms_says_the_file_cannot_be_upgraded(
        tmp_path, source, monkeypatch):
    from pybroker.storage import migration_defaults

    path = tmp_path / "i.duckdb"
    _build(path, (BY_COMMIT["33a620e"],), source)
    monkeypatch.setattr(migration_defaults, "split_column_defaults", lambda text: [text])
    with pytest.raises(pybroker.BrokerError, match=(
            r"cannot upgrade instance file .* from schema version 5: DuckDB .* refused "
            r"migration 006_activation\.sql on the rows the file holds .*Nothing was "
            r"changed: the file opens as it was with the pybroker that last wrote it")):
        pybroker.connect(path, worker=False)
    con = duckdb.connect(str(path))
    try:
        assert _version(con) == 5
    finally:
        con.close()
    monkeypatch.undo()
    with pybroker.connect(path, worker=False) as inst:  # the next open finishes the work
        assert inst.sql("SELECT max(version) FROM schema_migrations").fetchone() == (NEWEST,)


# run pybroker.connect(argv[1]) and SIGKILL it once the migrations up to argv[2] commit,
# before the checkpoint that ends the open's schema work
_UPGRADE_AND_DIE = r"""
import os, signal, sys
from pybroker.storage import schema as storage_schema
path, stop = sys.argv[1], int(sys.argv[2])
migrate = storage_schema.Schema.migrate
def migrate_and_die(self, pending):
    migrate(self, [p for p in pending if p[0] <= stop])
    os.kill(os.getpid(), signal.SIGKILL)
storage_schema.Schema.migrate = migrate_and_die
import pybroker
pybroker.connect(path, worker=False)
"""


@pytest.mark.parametrize(("made_by", "stop"), [
    ("f5a6e37", 2), ("f5a6e37", 6), ("33a620e", 6), ("33a620e", NEWEST)])
def test_a_kill_after_a_split_migration_commits_leaves_a_file_that_opens_whole(
        tmp_path, source, new_shape, made_by, stop):
    path = tmp_path / "i.duckdb"
    given, _refused = _build(path, (BY_COMMIT[made_by],), source)
    proc = subprocess.run([sys.executable, "-c", _UPGRADE_AND_DIE, str(path), str(stop)],
                          capture_output=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    assert Path(f"{path}.wal").exists()  # the split forms are in the log only
    con = duckdb.connect(str(path))  # the log replays in bare DuckDB: no recovery of ours
    try:
        assert _version(con) == stop
        assert con.execute("SELECT name, is_retention_enabled, is_poison_message_"
                           "handling_enabled FROM service_queues WHERE database_id = "
                           f"{KEPT}").fetchall() == [("KeptQueue", False, True)]
    finally:
        con.close()
    with pybroker.connect(path, worker=False) as inst:
        assert inst.sql("SELECT max(version) FROM schema_migrations").fetchone() == (NEWEST,)
        queue = inst.sql("SELECT is_activation_enabled, max_readers FROM service_queues "
                         f"WHERE database_id = {KEPT}").fetchall()
    assert queue == [(False, 0)]
    con = duckdb.connect(str(path))
    try:
        assert _shape(con) == new_shape
        for table, (columns, rows) in given.items():
            assert _kept_rows(con, table, columns) == rows, table
    finally:
        con.close()
