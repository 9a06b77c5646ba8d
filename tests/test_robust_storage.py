"""Opening an instance. A read-only open never writes (it works on a read-only
file and beside a DuckDB CLI reader); a DuckDB file that is not an instance is never
converted; a damaged file gets its own message, never a wrong diagnosis; Instance.sql() is
read-only."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pybroker
from pybroker import InvalidArgumentError, StorageError
from pybroker.cli.main import main

DAMAGE = settings(max_examples=30, derandomize=True, deadline=None, database=None,
                  suppress_health_check=[HealthCheck.function_scoped_fixture,
                                         HealthCheck.too_slow])


def build(path: Path) -> Path:
    with pybroker.connect(path, worker=False) as inst:
        db = inst.create_database("Shop")
        db.create_queue("Q")
        db.create_service("S", queue="Q")
        for i in range(20):
            db.create_route(f"R{i}", service_name=f"Far{i}", address=f"tcp://far{i}:4022")
    return path


@pytest.fixture(scope="module")
def instance_file(tmp_path_factory) -> Path:
    return build(tmp_path_factory.mktemp("robust") / "broker.duckdb")


def digest(path: Path) -> tuple[str, int]:
    return hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns


def read_everything(inst: pybroker.Instance) -> list[object]:
    seen: list[object] = []
    for db in inst.databases():
        seen += [db.routes(), db.queues(), db.services(), db.message_types(), db.contracts()]
    seen.append(inst.route("Far3", origin="Shop").address)
    seen.append(inst.explain("S", origin="Shop"))
    seen.append(inst.forwarding)
    seen.append(inst.sql("SELECT count(*) FROM sys.routes").fetchall())
    return seen


# -- read-only opens -----------------------------------------------------------------------


def test_a_read_only_open_writes_nothing(instance_file):
    before = digest(instance_file)
    with pybroker.connect(instance_file, read_only=True) as inst:
        assert inst.read_only
        seen = read_everything(inst)
        assert seen[-4] == "tcp://far3:4022"
        for write in (lambda: inst.create_database("X"),
                      lambda: setattr(inst, "forwarding", True),
                      lambda: inst.database("Shop").create_route("N", address="LOCAL"),
                      lambda: inst.database("Shop").execute("DROP ROUTE R1"),
                      lambda: inst.database("Shop").begin_dialog("S", "S"),
                      lambda: inst.run_pending()):
            with pytest.raises(StorageError, match="open read-only"):
                write()
    assert digest(instance_file) == before
    for command in (["databases"], ["routes"], ["route", "Far1", "--origin", "Shop"],
                    ["forwarding"]):
        assert main([command[0], str(instance_file), *command[1:]]) == 0
    assert digest(instance_file) == before


@contextlib.contextmanager
def immutable(path: Path) -> Iterator[str]:
    """The file made unwritable even for root (chattr +i); yields how."""
    done = subprocess.run(["chattr", "+i", str(path)], capture_output=True)
    if done.returncode != 0:
        raise OSError(done.stderr.decode(errors="replace").strip())
    try:
        yield "chattr +i"
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def run_as_nobody(path: Path, code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` as the unprivileged user nobody, with the file readable but not
    writable by it."""
    import pwd

    nobody = pwd.getpwnam("nobody")

    def drop() -> None:
        os.setgid(nobody.pw_gid)
        os.setuid(nobody.pw_uid)

    return subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                          text=True, timeout=300, preexec_fn=drop,
                          cwd=Path(__file__).parents[1])


def test_a_read_only_open_works_on_a_read_only_file(instance_file, tmp_path):
    path = tmp_path / "ro.duckdb"
    shutil.copy(instance_file, path)
    before = digest(path)
    try:
        with immutable(path):
            with pybroker.connect(path, read_only=True) as inst:
                read_everything(inst)
            assert main(["routes", str(path), "-d", "Shop"]) == 0
            with pytest.raises(StorageError, match=r"cannot open instance file .* for writing"):
                pybroker.connect(path)
    except OSError as chattr_failed:
        # Another way to a file root cannot write: be a user who cannot.
        shared = Path(tempfile.mkdtemp(prefix="pybroker-ro-"))
        try:
            shared.chmod(0o755)
            shutil.copy(path, shared / "ro.duckdb")
            (shared / "ro.duckdb").chmod(0o444)
            done = run_as_nobody(shared / "ro.duckdb", (
                "import sys, pybroker\n"
                "with pybroker.connect(sys.argv[1], read_only=True) as inst:\n"
                "    print(sorted(d.name for d in inst.databases()))\n"))
            if done.returncode != 0 and ("Permission denied" in done.stderr
                                         and "pybroker" not in done.stdout):
                pytest.skip(f"neither chattr +i ({chattr_failed}) nor running as nobody "
                            f"(cannot read Python there: {done.stderr[-200:]}) is available")
            assert done.returncode == 0, done.stderr
            assert done.stdout.strip() == "['Shop', 'master', 'msdb']"
        finally:
            shutil.rmtree(shared)
    assert digest(path) == before


def duckdb_cli() -> str:
    beside = Path(sys.executable).with_name("duckdb")
    found = str(beside) if beside.exists() else shutil.which("duckdb")
    assert found, "the duckdb CLI is missing: pip install duckdb-cli (it is in the test extra)"
    return found


def test_a_read_only_open_works_beside_a_duckdb_cli_reader(instance_file):
    before = digest(instance_file)
    reader = subprocess.Popen([duckdb_cli(), "-readonly", "-csv", str(instance_file)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        reader.stdin.write("SELECT count(*) AS n FROM sys.routes;\n")
        reader.stdin.flush()
        assert reader.stdout.readline().strip() == "n"  # the CLI has the file open now
        assert int(reader.stdout.readline()) == 22
        with pybroker.connect(instance_file, read_only=True) as inst:
            assert len(inst.database("Shop").routes()) == 21
        assert main(["databases", str(instance_file)]) == 0
        with pytest.raises(StorageError, match="already open in another process"):
            pybroker.connect(instance_file)  # a writer must wait for the reader
    finally:
        reader.stdin.close()
        reader.wait(timeout=60)
    assert digest(instance_file) == before


def test_a_read_only_open_refuses_what_it_cannot_read_without_writing(tmp_path):
    with pytest.raises(StorageError, match=r"no instance file at .* to open read-only"):
        pybroker.connect(tmp_path / "absent.duckdb", read_only=True)
    assert not (tmp_path / "absent.duckdb").exists()
    old = build(tmp_path / "old.duckdb")
    with duckdb.connect(str(old)) as con:  # as if written before migration 2 existed
        con.execute("DELETE FROM schema_migrations WHERE version >= 2")
    before = digest(old)
    with pytest.raises(StorageError, match=r"needs migration to \d+; a read-only open never"):
        pybroker.connect(old, read_only=True)
    assert digest(old) == before
    with duckdb.connect(str(old)) as con:  # as if written by a newer pybroker
        con.execute("INSERT INTO schema_migrations VALUES (2, 'x', now()), (99, 'y', now())")
    for read_only in (True, False):
        with pytest.raises(StorageError, match="schema version 99, newer than"):
            pybroker.connect(old, read_only=read_only)


def test_a_duckdb_file_that_is_not_an_instance_is_never_converted(tmp_path, capsys):
    plain = tmp_path / "plain.duckdb"
    with duckdb.connect(str(plain)) as con:
        con.execute("CREATE TABLE sales (id INTEGER)")
    before = digest(plain)
    for read_only in (True, False):
        with pytest.raises(StorageError, match="a DuckDB database but not a pybroker instance"):
            pybroker.connect(plain, read_only=read_only)
    for argv in (["databases", str(plain)], ["routes", str(plain)],
                 ["create-database", str(plain), "A"], ["forwarding", str(plain), "on"]):
        assert main(argv) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "not a pybroker instance file" in err[0]
    assert digest(plain) == before
    with duckdb.connect(str(plain), read_only=True) as con:
        assert con.execute("SELECT table_name FROM duckdb_tables()").fetchall() == [("sales",)]


# -- damaged files ------------------------------------------------------------------------


def damaged_outcome(path: Path, read_only: bool) -> str:
    """What opening and reading a possibly damaged file gives: 'ok' or the StorageError."""
    try:
        with pybroker.connect(path, read_only=read_only, worker=False) as inst:
            read_everything(inst)
    except StorageError as exc:
        return str(exc)
    return "ok"


def assert_clean_diagnosis(outcome: str) -> None:
    assert "already open" not in outcome  # the old misdiagnosis: "block" holds "lock"
    assert outcome == "ok" or "is damaged" in outcome or "not a DuckDB database" in outcome \
        or "not a pybroker instance" in outcome, outcome
    assert "IO Error" not in outcome and "checksum 1" not in outcome


@DAMAGE
@given(data=st.data())
def test_flipped_bytes_give_a_damaged_file_message(instance_file, tmp_path, data):
    size = instance_file.stat().st_size
    # the header and catalog blocks are where damage is certain to be read
    offset = data.draw(st.one_of(st.integers(0, 3 * 4096), st.integers(0, size - 1)))
    length = data.draw(st.integers(1, 16))
    path = tmp_path / "flipped.duckdb"
    raw = bytearray(instance_file.read_bytes())
    for i in range(offset, min(size, offset + length)):
        raw[i] ^= 0xFF
    path.write_bytes(bytes(raw))
    assert_clean_diagnosis(damaged_outcome(path, read_only=True))
    assert_clean_diagnosis(damaged_outcome(path, read_only=False))


@DAMAGE
@given(keep=st.integers(0, 10**7))
def test_a_truncated_file_gives_a_damaged_file_message(instance_file, tmp_path, keep):
    raw = instance_file.read_bytes()
    path = tmp_path / "short.duckdb"
    path.write_bytes(raw[: keep % len(raw)])
    outcome = damaged_outcome(path, read_only=True)
    assert outcome != "ok" or keep % len(raw) == 0
    assert_clean_diagnosis(outcome)


def test_the_damage_of_the_issue_is_named(instance_file, tmp_path, capsys):
    raw = bytearray(instance_file.read_bytes())
    for i in range(5000, 5004):  # a flipped block after the header
        raw[i] ^= 0xFF
    path = tmp_path / "damaged.duckdb"
    path.write_bytes(bytes(raw))
    with pytest.raises(StorageError) as caught:
        pybroker.connect(path)
    assert str(caught.value) == (
        f"instance file {path} is damaged: the block at byte 4,096 fails its checksum; "
        "restore it from a backup")
    assert main(["routes", str(path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"pybroker: error: instance file {path} is damaged: the block at byte "
                   "4,096 fails its checksum; restore it from a backup"]


# -- Instance.sql() ---------------------------------------------------------------------------


@pytest.mark.parametrize("statement", [
    "CREATE TABLE t (x INTEGER)", "DROP VIEW sys.routes", "COPY routes TO 'out.csv'",
    "DELETE FROM routes", "UPDATE routes SET address = 'LOCAL'", "INSERT INTO routes "
    "SELECT * FROM routes", "ATTACH 'other.duckdb' AS o", "DETACH o", "INSTALL httpfs",
    "LOAD httpfs", "SET threads = 1", "CHECKPOINT", "EXPORT DATABASE 'dump'",
    "SELECT 1; DELETE FROM routes", "SELECT nextval('route_id_seq')", "PRAGMA threads = 1",
    "CALL pragma_version()", "ALTER TABLE routes ADD COLUMN x INTEGER", "VACUUM",
])
def test_instance_sql_is_read_only(instance_file, tmp_path, monkeypatch, statement):
    path = tmp_path / "i.duckdb"
    shutil.copy(instance_file, path)
    monkeypatch.chdir(tmp_path)
    with pybroker.connect(path, worker=False) as inst:
        before = inst.route("Far3", origin="Shop")
        with pytest.raises(InvalidArgumentError, match=r"read-only|exactly one"):
            inst.sql(statement)
        assert inst.route("Far3", origin="Shop").address == before.address == "tcp://far3:4022"
        assert len(inst.database("Shop").routes()) == 21
        assert inst.sql("SELECT count(*) FROM sys.routes").fetchone() == (22,)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["i.duckdb"]  # nothing copied out
