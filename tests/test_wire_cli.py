"""The endpoint's commands as real processes: cert, trust, untrust, serve."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

import pytest

import pybroker

pytestmark = pytest.mark.cli


def run(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "pybroker", *map(str, args)],
                          capture_output=True, text=True, input=stdin, timeout=120)


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
