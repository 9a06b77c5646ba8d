"""The endpoint's commands as real processes: cert, trust, untrust, serve."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys

import pytest

import pybroker
from pybroker.devtools.chaos.ports import free_port
from tests.cli_helpers import run

pytestmark = pytest.mark.cli


def test_cert_is_made_once_and_trust_admits_a_peer(tmp_path):
    for name in ("a", "b"):
        pybroker.connect(tmp_path / f"{name}.duckdb", worker=False).close()
    first = run("cert", tmp_path / "a.duckdb")
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("-----BEGIN CERTIFICATE-----")
    assert run("cert", tmp_path / "a.duckdb").stdout == first.stdout  # kept in the file
    pem = tmp_path / "a.pem"
    pem.write_text(first.stdout)
    done = run("trust", tmp_path / "b.duckdb", "Shop", pem)
    assert done.returncode == 0 and done.stdout.strip() == "trusted Shop"
    with pybroker.connect(tmp_path / "b.duckdb", worker=False) as b:
        assert b.sql("SELECT name FROM sys.certificates").fetchall() == [("Shop",)]
        assert "PRIVATE" not in str(b.sql("SELECT * FROM sys.certificates").fetchall())
    assert run("untrust", tmp_path / "b.duckdb", "Shop").returncode == 0
    gone = run("untrust", tmp_path / "b.duckdb", "Shop")
    assert gone.returncode == 1 and gone.stderr.count("\n") == 1
    assert "no trusted peer is called 'Shop'" in gone.stderr


def test_trust_refuses_what_is_not_a_certificate(tmp_path):
    bad = tmp_path / "bad.pem"
    bad.write_text("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")
    pybroker.connect(tmp_path / "b.duckdb", worker=False).close()
    done = run("trust", tmp_path / "b.duckdb", "X", bad)
    assert done.returncode == 1 and done.stderr.count("\n") == 1
    assert "not a PEM certificate" in done.stderr
    missing = run("trust", tmp_path / "b.duckdb", "X", tmp_path / "nothing.pem")
    assert missing.returncode == 1 and "cannot read certificate file" in missing.stderr


def test_serve_prints_its_address_accepts_and_stops_on_sigterm(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-m", "pybroker", "serve", str(tmp_path / "s.duckdb"), "--create",
         "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline().strip()
        assert line.startswith("listening on tcp://127.0.0.1:"), line
        port = int(line.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=30) as peer:
            peer.sendall(b"not TLS\r\n" * 100)  # it accepts, then refuses the garbage
            while peer.recv(4096):
                pass  # until the endpoint closes the connection
        os.kill(proc.pid, signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        assert out.strip().splitlines() == [
            f"clients on {tmp_path / 's.duckdb'}.sock", "stopped"]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    # closed cleanly: the file opens, and its last events say so
    with pybroker.connect(tmp_path / "s.duckdb", worker=False) as inst:
        subclasses = [r[0] for r in inst.sql("SELECT subclass FROM sys.broker_events")
                      .fetchall()]
        assert "Listening" in subclasses and "Accept" in subclasses


def test_serve_on_a_taken_port_fails_with_one_line(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        done = run("serve", tmp_path / "s.duckdb", "--create", "--port",
                   taken.getsockname()[1])
    assert done.returncode == 1 and done.stderr.count("\n") == 1
    assert "cannot start the broker endpoint" in done.stderr


# -- the endpoint the instance file defines (CREATE ENDPOINT on master) -----------------------


def define_endpoint(path, tsql: str) -> None:
    with pybroker.connect(path, worker=False) as inst:
        inst.database("master").execute(tsql)


def serve_first_line(path, *args: object) -> str:
    """Run `pybroker serve PATH ARGS`, take the first line it prints, connect to the port it
    says it listens on (if it does), and stop it with SIGTERM."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "pybroker", "serve", str(path), *map(str, args)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline().strip()
        if line.startswith("listening on tcp://"):
            host, port = line.removeprefix("listening on tcp://").rsplit(":", 1)
            with socket.create_connection((host, int(port)), timeout=30):
                pass
        os.kill(proc.pid, signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, (line, err)
        assert out.strip().splitlines()[-1] == "stopped"
        return line
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def test_serve_starts_the_endpoint_the_file_defines_and_port_overrides_it(tmp_path):
    path = tmp_path / "s.duckdb"
    defined = free_port()
    define_endpoint(path, f"CREATE ENDPOINT BrokerEndpoint AS TCP (LISTENER_PORT = {defined}, "
                          "LISTENER_IP = (127.0.0.1)) FOR SERVICE_BROKER ()")  # STOPPED
    assert serve_first_line(path) == (
        "not listening: the broker endpoint BrokerEndpoint is STOPPED (ALTER ENDPOINT "
        "BrokerEndpoint STATE = STARTED on master, or --port, starts it)")
    define_endpoint(path, "ALTER ENDPOINT BrokerEndpoint STATE = STARTED")
    assert serve_first_line(path) == f"listening on tcp://127.0.0.1:{defined}"
    other = free_port()
    assert serve_first_line(path, "--port", other) == f"listening on tcp://127.0.0.1:{other}"
    with pybroker.connect(path, worker=False) as inst:  # the override was for that run only
        assert inst.sql("SELECT port, state_desc FROM sys.tcp_endpoints").fetchall() == [
            (defined, "STARTED")]
        assert inst.endpoint is None  # and an embedded open starts nothing


def test_serve_with_no_endpoint_defined_listens_on_4022(tmp_path):
    path = tmp_path / "s.duckdb"
    define_endpoint(path, "CREATE ENDPOINT e STATE = STARTED AS TCP (LISTENER_PORT = 0) "
                          "FOR SERVICE_BROKER ()")
    define_endpoint(path, "DROP ENDPOINT e")
    # 4022 itself is never served here: it is held (by this test, or by whatever else holds
    # it), so serve's default shows in the port it fails to bind
    with socket.socket() as held:
        held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # past TIME_WAITs
        with contextlib.suppress(OSError):
            held.bind(("127.0.0.1", 4022))
            held.listen()
        done = run("serve", path)
    assert done.returncode == 1 and done.stderr.count("\n") == 1
    assert "cannot start the broker endpoint on 127.0.0.1:4022" in done.stderr


def test_serve_runs_the_file_under_the_memory_limit_and_threads_it_is_given(tmp_path):
    path = tmp_path / "m.duckdb"
    bad = run("serve", path, "--create", "--port", "0", "--memory-limit", "lots")
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1
    assert "memory_limit must be a size with its unit" in bad.stderr
    bad = run("serve", path, "--create", "--port", "0", "--threads", "0")
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1
    assert "threads must be a whole number from 1 to 1,024, not 0" in bad.stderr
    assert not path.exists()  # refused before anything was made
    proc = subprocess.Popen(
        [sys.executable, "-m", "pybroker", "serve", str(path), "--create", "--port", "0",
         "--memory-limit", "300MiB", "--threads", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().startswith("listening on tcp://127.0.0.1:")
        assert proc.stdout.readline().strip() == f"clients on {path}.sock"
        with pybroker.connect(path) as client:  # through the server: it holds the file
            assert "server" in repr(client)
            shown = client.sql("SELECT current_setting('memory_limit'), "
                               "current_setting('threads')").fetchone()
        assert shown == ("300.0 MiB", 2)
        os.kill(proc.pid, signal.SIGTERM)
        proc.communicate(timeout=30)
        assert proc.returncode == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
