"""Instance.snapshot() and ``pybroker snapshot``: a point-in-time copy of a live instance
that the real DuckDB CLI opens, sys.* views and macros working, while the instance is
still held by the process that wrote it."""

from __future__ import annotations

import csv
import io
import subprocess
import sys
from pathlib import Path

import pytest
from conftest_conversations import make_broker
from test_duckdb_cli import duckdb_binary

import pybroker
from pybroker.cli.main import main
from pybroker.errors import AlreadyExistsError, InvalidArgumentError

pytestmark = pytest.mark.cli


def duckdb_cli(path: Path, query: str) -> list[dict[str, str]]:
    done = subprocess.run([duckdb_binary(), "-readonly", "-csv", str(path), "-c", query],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return list(csv.DictReader(io.StringIO(done.stdout)))


@pytest.fixture
def live(tmp_path):
    """An open instance: a local conversation A.SA -> B.SB with two messages in QB, and a
    conversation to a remote service whose message waits in A's transmission queue."""
    broker = make_broker(tmp_path / "live.duckdb")
    broker.a.execute("CREATE ROUTE FarRoute WITH SERVICE_NAME = 'FarService', "
                     "ADDRESS = 'TCP://far.example:4022'")
    local = broker.a.begin_dialog("SA", "SB")
    local.send(b"first")
    local.send(b"second")
    remote = broker.a.begin_dialog("SA", "FarService")
    remote.send(b"<order id='7'/>")
    yield broker, local, remote
    broker.inst.close()


def test_the_duckdb_cli_reads_a_snapshot_while_the_instance_is_open(live, tmp_path):
    broker, local, remote = live
    out = tmp_path / "snap.duckdb"
    assert broker.inst.snapshot(out) == out
    # the instance is still open (its file locked by this process); the copy is not
    assert not broker.inst.kernel.closed
    endpoints = duckdb_cli(out, "SELECT database_name, service_name, far_service, state, "
                           "send_sequence, conversation_handle FROM sys.conversation_endpoints "
                           "ORDER BY database_name, far_service")
    assert [(r["database_name"], r["service_name"], r["far_service"], r["state"])
            for r in endpoints] == [
        ("A", "SA", "FarService", "CO"), ("A", "SA", "SB", "CO"), ("B", "SB", "SA", "CO")]
    by_far = {r["far_service"]: r for r in endpoints if r["database_name"] == "A"}
    assert by_far["SB"]["conversation_handle"] == local.handle
    assert by_far["FarService"]["conversation_handle"] == remote.handle
    assert by_far["SB"]["send_sequence"] == "2"
    (waiting,) = duckdb_cli(out, "SELECT database_name, to_service_name, from_service_name, "
                            "message_sequence_number, decode(message_body) AS body "
                            "FROM sys.transmission_queue")
    assert waiting == {"database_name": "A", "to_service_name": "FarService",
                       "from_service_name": "SA", "message_sequence_number": "0",
                       "body": "<order id='7'/>"}
    queued = duckdb_cli(out, "SELECT casted_message_body FROM queue_contents('B', 'QB')")
    assert [r["casted_message_body"] for r in queued] == ["first", "second"]
    routes = duckdb_cli(out, "SELECT name, address FROM sys.routes WHERE database_name = 'A' "
                        "ORDER BY name")
    assert [(r["name"], r["address"]) for r in routes] == [
        ("AutoCreatedLocal", "LOCAL"), ("FarRoute", "TCP://far.example:4022")]
    (decision,) = duckdb_cli(out, "SELECT outcome, route, address FROM route_decision('A', "
                             "'FarService')")
    assert decision == {"outcome": "send", "route": "FarRoute",
                        "address": "TCP://far.example:4022"}


def test_a_snapshot_is_a_point_in_time_copy(live, tmp_path):
    broker, local, _ = live
    first = broker.inst.snapshot(tmp_path / "one.duckdb")
    local.send(b"third")  # committed after the first snapshot: only in the second
    with broker.a.transaction():
        local.send(b"uncommitted")  # in a transaction in progress: in neither
        second = broker.inst.snapshot(tmp_path / "two.duckdb")
    count = "SELECT count(*) AS n FROM sys.queue_messages WHERE queue_name = 'QB'"
    assert duckdb_cli(first, count) == [{"n": "2"}]
    assert duckdb_cli(second, count) == [{"n": "3"}]
    # the live instance has all four; the copies never follow it
    assert broker.rows(count) == [(4,)]
    assert duckdb_cli(first, count) == [{"n": "2"}]
    # a snapshot is an instance file too
    with pybroker.connect(second, read_only=True) as copy:
        assert copy.sql(count).fetchall() == [(3,)]


def test_an_existing_file_is_refused_unless_overwrite(live, tmp_path):
    broker, _, _ = live
    out = tmp_path / "snap.duckdb"
    out.write_bytes(b"keep me")
    with pytest.raises(AlreadyExistsError, match=r"snap\.duckdb already exists.*overwrite"):
        broker.inst.snapshot(out)
    assert out.read_bytes() == b"keep me"
    with pytest.raises(InvalidArgumentError, match="is the instance file itself"):
        broker.inst.snapshot(broker.inst.path, overwrite=True)
    with pytest.raises(InvalidArgumentError, match="is a directory"):
        broker.inst.snapshot(tmp_path)
    broker.inst.snapshot(out, overwrite=True)
    assert duckdb_cli(out, "SELECT count(*) AS n FROM sys.transmission_queue") == [{"n": "1"}]
    # nothing left beside it: the copy was written under a hidden name and moved
    names = sorted(p.name for p in tmp_path.iterdir())
    assert [n for n in names if not n.startswith("live.duckdb")] == ["snap.duckdb"]


def test_an_in_memory_instance_can_be_snapshotted(tmp_path):
    with pybroker.connect(None, worker=False) as inst:
        inst.create_database("Shop")
        out = inst.snapshot(tmp_path / "mem.duckdb")
    assert duckdb_cli(out, "SELECT name FROM sys.databases ORDER BY name") == [
        {"name": "Shop"}, {"name": "master"}, {"name": "msdb"}]


def test_the_snapshot_command(tmp_path, capsys):
    path = tmp_path / "i.duckdb"
    with pybroker.connect(path, worker=False) as inst:
        inst.create_database("Shop")
    out = tmp_path / "copy.duckdb"
    assert main(["snapshot", str(path), str(out)]) == 0
    said = capsys.readouterr().out
    assert said.startswith(f"wrote {out}: a copy of {path} as committed at ")
    assert "does not follow later changes" in said
    assert duckdb_cli(out, "SELECT count(*) AS n FROM sys.routes") == [{"n": "2"}]
    assert main(["snapshot", str(path), str(out)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"pybroker: error: {out} already exists") and "--force" in err
    assert main(["snapshot", str(path), str(out), "--force"]) == 0
    assert main(["snapshot", str(tmp_path / "missing.duckdb"), str(tmp_path / "x.duckdb")]) == 1
    assert "no instance file at" in capsys.readouterr().err


def test_the_snapshot_command_as_a_process(tmp_path):
    path = tmp_path / "i.duckdb"
    with pybroker.connect(path, worker=False) as inst:
        inst.create_database("Shop")
    done = subprocess.run([sys.executable, "-m", "pybroker", "snapshot", str(path), "rel.duckdb"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "rel.duckdb").exists()
    assert duckdb_cli(tmp_path / "rel.duckdb", "SELECT name FROM sys.databases "
                      "WHERE name = 'Shop'") == [{"name": "Shop"}]
