"""The instance file: migrations, reopening, all-or-nothing writes and unusable files
(real DuckDB files in tmp_path, a real second process for the lock)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import duckdb
import pytest

import pybroker
from pybroker import AlreadyExistsError, BrokerError, InvalidArgumentError, NotFoundError
from pybroker.errors import StorageError
from pybroker.storage.schema import available_migrations, superseded_migrations
from pybroker.storage.store import Store
from tests.thread_helpers import held_open


def test_a_new_file_gets_every_migration_and_the_system_databases(tmp_path):
    path = tmp_path / "i.duckdb"
    with pybroker.connect(path) as inst:
        names = [d.name for d in inst.databases()]
        versions = inst.sql("SELECT version FROM schema_migrations ORDER BY 1").fetchall()
    assert names == ["master", "msdb"]
    assert [v for (v,) in versions] == [
        v for v, _, _ in available_migrations() if v not in superseded_migrations()]
    assert superseded_migrations() == {12, 13}  # by 014 and 015 (migrations/README.md)


def test_reopening_applies_only_new_migrations(tmp_path, monkeypatch):
    path = tmp_path / "i.duckdb"
    with pybroker.connect(path) as inst:
        inst.create_database("A").create_route("R", address="tcp://a:1")
    extra = tmp_path / "migrations"
    extra.mkdir()
    for _version, _name, source in available_migrations():
        (extra / source.name).write_text(source.read_text())
    (extra / "999_never.sql").unlink(missing_ok=True)
    next_version = len(available_migrations()) + 1
    (extra / f"{next_version:03d}_add_note.sql").write_text(
        "CREATE TABLE route_notes (route_name VARCHAR, note VARCHAR);"
    )
    monkeypatch.setattr("pybroker.storage.schema.migrations_dir", lambda: extra)
    with pybroker.connect(path) as inst:
        applied = inst.sql("SELECT version, name FROM schema_migrations ORDER BY 1").fetchall()
        assert applied[-1] == (next_version, "add_note")
        assert inst.database("A").route("R").address == "tcp://a:1"  # data kept, 001 not rerun
        assert len([d for d in inst.databases() if d.name == "msdb"]) == 1
    with pybroker.connect(path) as inst:  # nothing new: nothing applied
        assert len(inst.sql("SELECT * FROM schema_migrations").fetchall()) == (
            next_version - len(superseded_migrations()))


def test_state_survives_close_and_reopen(tmp_path):
    path = tmp_path / "i.duckdb"
    with pybroker.connect(path) as inst:
        db = inst.create_database("A", broker_instance="5FB8D92B-ED69-4C80-AFBB-2AA6A7D3CB2D")
        db.create_queue("q", status=False)
        db.create_service("S", queue="q")
        inst.forwarding = True
    with pybroker.connect(path) as inst:
        db = inst.database("A")
        assert db.broker_instance == "5fb8d92b-ed69-4c80-afbb-2aa6a7d3cb2d"
        assert [(q.name, q.status) for q in db.queues()] == [("q", False)]
        assert [(s.name, s.queue) for s in db.services()] == [("S", "q")]
        assert inst.forwarding is True


def test_a_file_that_is_not_duckdb_is_refused(tmp_path):
    path = tmp_path / "notes.duckdb"
    path.write_text("this is not a database\n" * 100)
    with pytest.raises(StorageError, match="not a DuckDB database file"):
        pybroker.connect(path)
    assert path.read_text().startswith("this is not a database")  # untouched


def test_a_directory_is_refused(tmp_path):
    with pytest.raises(StorageError, match="it is a directory"):
        pybroker.connect(tmp_path)


def test_a_file_open_in_another_process_is_refused(tmp_path):
    path = tmp_path / "i.duckdb"
    pybroker.connect(path).close()
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys, duckdb
            con = duckdb.connect({str(path)!r})
            print("open", flush=True)
            sys.stdin.readline()
        """)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "open"
        with pytest.raises(StorageError, match="already open in another process"):
            pybroker.connect(path)
    finally:
        holder.communicate("\n", timeout=30)
    pybroker.connect(path).close()  # free again once the other process is gone


def test_a_failed_batch_changes_nothing(tmp_path):
    with pybroker.connect(tmp_path / "i.duckdb") as inst:
        db = inst.create_database("A")
        with pytest.raises(BrokerError):
            db.execute(
                "CREATE ROUTE One WITH ADDRESS = 'tcp://a:1';"
                "CREATE ROUTE Two WITH ADDRESS = 'nonsense'"
            )
        assert [r.name for r in db.routes()] == ["AutoCreatedLocal"]


def test_a_duckdb_error_inside_a_write_rolls_back_and_is_a_broker_error(tmp_path):
    with pybroker.connect(tmp_path / "i.duckdb") as inst:
        db = inst.create_database("A")
        with pytest.raises(BrokerError, match="the change was not made"), inst.kernel.write():
            inst.kernel.store.run(
                "instance/insert_queue.sql",
                {"database_id": db.database_id, "name": "q", "status": True,
                 "now": inst.kernel.now()},
            )
            inst.kernel.store.execute(
                "INSERT INTO service_queues VALUES (NULL, NULL, NULL, NULL, NULL)")
        assert db.queues() == []


def test_the_store_keeps_one_schema_version(tmp_path):
    store = Store(tmp_path / "s.duckdb")
    try:
        assert store.schema_version() == len(available_migrations())
    finally:
        store.close()
    con = duckdb.connect(str(tmp_path / "s.duckdb"), read_only=True)
    assert con.execute("SELECT COUNT(*) FROM sys.routes").fetchone()[0] == 1
    con.close()


# -- bad input through the API ---------------------------------------------------------------


@pytest.fixture
def inst():
    with pybroker.connect() as instance:
        yield instance


@pytest.mark.parametrize("name", ["", "   ", "x" * 129, None, 42])
def test_bad_database_names(inst, name):
    with pytest.raises(InvalidArgumentError):
        inst.create_database(name)
    assert [d.name for d in inst.databases()] == ["master", "msdb"]


@pytest.mark.parametrize("guid", ["", "123", "5fb8d92b-ed69-4c80-afbb-2aa6a7d3cb2", "zzz", 7])
def test_bad_broker_instances(inst, guid):
    with pytest.raises(InvalidArgumentError, match="GUID"):
        inst.create_database("A", broker_instance=guid)
    with pytest.raises(NotFoundError):
        inst.database("A")


def test_duplicate_names_and_identifiers(inst):
    a = inst.create_database("A")
    with pytest.raises(AlreadyExistsError, match="database 'A' already exists"):
        inst.create_database("A")
    with pytest.raises(AlreadyExistsError, match="already the identifier of database 'A'"):
        inst.create_database("B", broker_instance=a.broker_instance.upper())
    with pytest.raises(BrokerError, match="'outside' cannot name a database"):
        inst.create_database("outside")
    a.create_queue("q")
    with pytest.raises(AlreadyExistsError):
        a.create_queue("q")
    a.create_service("S", queue="q")
    with pytest.raises(AlreadyExistsError):
        a.create_service("S", queue="q")


def test_unknown_names(inst):
    a = inst.create_database("A")
    with pytest.raises(NotFoundError, match="database 'Nope' does not exist"):
        inst.database("Nope")
    with pytest.raises(NotFoundError, match="queue 'nq' does not exist in database 'A'"):
        a.create_service("S", queue="nq")
    with pytest.raises(NotFoundError, match="route 'nr' does not exist"):
        a.route("nr")
    with pytest.raises(NotFoundError, match="route 'nr' does not exist"):
        a.alter_route("nr", address="LOCAL")
    with pytest.raises(NotFoundError, match="neither a database of this instance nor 'outside'"):
        inst.route("S", origin="Nope")
    with pytest.raises(InvalidArgumentError, match="service name must not be empty"):
        inst.route("", origin="A")
    with pytest.raises(InvalidArgumentError, match="not a GUID"):
        inst.route("S", origin="A", broker_instance="nope")
    with pytest.raises(BrokerError, match="cannot change colour"):
        a.alter_route("AutoCreatedLocal", colour="blue")
    with pytest.raises(BrokerError, match="at least one clause"):
        a.alter_route("AutoCreatedLocal")


def test_a_closed_instance_refuses_writes(tmp_path):
    inst = pybroker.connect(tmp_path / "i.duckdb")
    inst.close()
    inst.close()  # closing twice is harmless
    with pytest.raises(BrokerError, match="closed"):
        inst.create_database("A")


def test_errors_share_one_root():
    for name in pybroker.__all__:
        obj = getattr(pybroker, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, BrokerError)


def test_a_writable_file_checkpoints_at_a_64_mib_log_and_a_read_only_one_is_left_alone(
        tmp_path):
    """storage.CHECKPOINT_THRESHOLD: fewer checkpoints for a queue's short-lived rows."""
    path = tmp_path / "i.duckdb"
    with pybroker.connect(path) as inst:
        setting = inst.kernel.store.connection.execute(
            "SELECT current_setting('checkpoint_threshold')").fetchone()[0]
    assert setting == "64.0 MiB"
    # a quarter of a smaller memory limit: checkpointing needs the log's rows again in memory
    with pybroker.connect(path, memory_limit="128MiB") as inst:
        assert inst.kernel.store.connection.execute(
            "SELECT current_setting('checkpoint_threshold')").fetchone()[0] == "32.0 MiB"
    store = Store(path, read_only=True)
    try:
        assert store.connection.execute(
            "SELECT current_setting('checkpoint_threshold')").fetchone()[0] == "16.0 MiB"
    finally:
        store.close()


def test_another_threads_open_transaction_is_not_this_threads(tmp_path):
    """in_transaction is the calling thread's: while one thread holds a transaction open,
    another thread is not inside it (what it writes waits, then commits on its own)."""
    store = Store(tmp_path / "i.duckdb")
    seen: list[bool] = []
    try:
        with held_open(store.transaction, lambda: seen.append(store.in_transaction)):
            assert store.in_transaction is False
    finally:
        store.close()
    assert seen == [True]


def test_a_write_ending_as_another_threads_write_begins_still_retries_what_waits(tmp_path):
    """The outermost catalog write of a thread retries every waiting transmission when it
    commits (C3, C5), even when another thread's write takes the file the moment it is
    free: which write is outermost is counted before the store's lock is let go."""
    import threading

    with pybroker.connect(tmp_path / "i.duckdb", worker=False) as inst:
        retried: list[str] = []
        entered, retried_by_a = threading.Event(), threading.Event()
        real_retry = inst.kernel.messaging.after_catalog_write
        real_changed = inst.kernel.messaging.catalog_changed

        def after_catalog_write() -> None:
            retried.append(threading.current_thread().name)
            if threading.current_thread().name == "A":
                retried_by_a.set()
            real_retry()

        def other_write() -> None:
            with inst.kernel.write():
                entered.set()
                retried_by_a.wait(10)

        other = threading.Thread(target=other_write, name="B")

        def changed() -> None:  # the last step before A's retry: the file is free
            if threading.current_thread().name == "A" and not other.is_alive():
                other.start()
                assert entered.wait(10)
            real_changed()

        inst.kernel.messaging.after_catalog_write = after_catalog_write
        inst.kernel.messaging.catalog_changed = changed
        writer = threading.Thread(target=lambda: inst.create_database("D"), name="A")
        writer.start()
        writer.join(30)
        other.join(30)
        assert not writer.is_alive() and not other.is_alive()
        assert sorted(retried) == ["A", "B"]
        assert sorted(d.name for d in inst.databases()) == ["D", "master", "msdb"]
