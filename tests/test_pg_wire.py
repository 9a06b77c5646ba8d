"""The PostgreSQL wire protocol, read-only: the real psql and psycopg against ``pybroker
serve FILE --pg-port 0`` on 127.0.0.1, plus the protocol core fed in memory."""

from __future__ import annotations

import base64
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from conftest_conversations import make_broker
from hypothesis import given, settings
from hypothesis import strategies as st

import pybroker
from pybroker.cli.main import main
from pybroker.server import pg_protocol as wire
from pybroker.server.pg import PASSWORD_ENV, PgServer, PgSession
from tests.process_helpers import wait_until

psycopg = pytest.importorskip("psycopg")
PSQL = shutil.which("psql")
needs_psql = pytest.mark.skipif(PSQL is None, reason="psql (postgresql-client) is missing")
PASSWORD = "s3cret pass"


def build_instance(path: Path) -> None:
    broker = make_broker(path)
    broker.a.execute("CREATE ROUTE FarRoute WITH SERVICE_NAME = 'FarService', "
                     "ADDRESS = 'TCP://far.example:4022'")
    local = broker.a.begin_dialog("SA", "SB")
    local.send(b"hello B")
    remote = broker.a.begin_dialog("SA", "FarService")
    remote.send(b"<order id='7'/>")
    broker.inst.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``pybroker serve`` with --pg-port 0 as a process; yields (port, process, its stderr
    file)."""
    where = tmp_path_factory.mktemp("pg")
    path = where / "served.duckdb"
    build_instance(path)
    secret = where / "pg-password"
    secret.write_text(PASSWORD + "\n")
    secret.chmod(0o600)
    log = where / "serve.stderr"
    with log.open("w") as err:  # a file, not a pipe nobody reads: the server never blocks
        proc = subprocess.Popen(
            [sys.executable, "-m", "pybroker", "serve", str(path), "--port", "0",
             "--pg-port", "0", "--pg-password-file", str(secret), "--quiet"],
            stdout=subprocess.PIPE, stderr=err, text=True)
    try:
        lines = [proc.stdout.readline().strip() for _ in range(3)]
        assert lines[0].startswith("listening on tcp://127.0.0.1:"), (lines, log.read_text())
        assert lines[1].startswith("clients on "), lines
        second = lines[2]
        assert second.startswith("postgresql wire (read-only) on 127.0.0.1:"), second
        yield int(second.rsplit(":", 1)[1]), proc, log
        assert proc.poll() is None, "the server stopped during the tests"
        os.kill(proc.pid, signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0, log.read_text()
        assert out.strip() == "stopped"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)


def psql(port: int, *commands: str, password: str = PASSWORD) -> subprocess.CompletedProcess:
    args = [PSQL, "-X", "-A", "-F", "|", "-h", "127.0.0.1", "-p", str(port), "-U", "analyst",
            "-d", "broker", "-v", "VERBOSITY=verbose"]
    for command in commands:
        args += ["-c", command]
    env = {**os.environ, "PGPASSWORD": password, "PGCONNECT_TIMEOUT": "30"}
    return subprocess.run(args, capture_output=True, text=True, timeout=120, env=env)


def connect(port: int, password: str = PASSWORD, **options):
    return psycopg.connect(host="127.0.0.1", port=port, user="analyst", dbname="broker",
                           password=password, connect_timeout=30, **options)


# -- psql ---------------------------------------------------------------------------------


@needs_psql
def test_psql_reads_the_transmission_queue(server):
    port, _, _ = server
    done = psql(port, "SELECT database_name, to_service_name, from_service_name, "
                "message_sequence_number, message_body FROM sys.transmission_queue")
    assert done.returncode == 0, done.stderr
    body = "\\x" + b"<order id='7'/>".hex()
    assert done.stdout.splitlines() == [
        "database_name|to_service_name|from_service_name|message_sequence_number|message_body",
        f"A|FarService|SA|0|{body}",
        "(1 row)",
    ]


@needs_psql
def test_psql_write_is_refused_with_sqlstate_25006(server):
    port, _, _ = server
    done = psql(port, "DELETE FROM sys.routes")
    assert done.returncode == 1
    assert "ERROR:  25006: Instance.sql() is read-only: a DELETE statement is refused" in (
        done.stderr)
    assert psql(port, "SELECT count(*) FROM sys.routes").stdout.splitlines()[1] == "4"


@needs_psql
def test_psql_with_a_wrong_password_is_refused(server):
    port, _, _ = server
    done = psql(port, "SELECT 1", password="not it")
    assert done.returncode == 2
    assert 'password authentication failed for user "analyst"' in done.stderr


@needs_psql
def test_psql_catalog_commands_fail_cleanly_and_the_session_goes_on(server):
    port, _, _ = server
    done = psql(port, "\\d", "\\dt", "\\l", "\\dn", "\\du", "\\d sys.routes", "\\conninfo",
                "SELECT 'still here' AS answer")
    assert done.stdout.splitlines()[-2:] == ["still here", "(1 row)"], done.stderr
    assert "duckdb_tables()" in done.stderr  # the hint says what to use instead
    assert psql(port, "SELECT 1 AS one").stdout.splitlines() == ["one", "1", "(1 row)"]


# -- psycopg ------------------------------------------------------------------------------


def test_psycopg_reads_catalog_views_with_types(server):
    port, _, _ = server
    with connect(port) as conn:
        (row,) = conn.execute("SELECT to_service_name, message_body, is_end_of_dialog, "
                              "message_sequence_number, enqueue_time FROM "
                              "sys.transmission_queue").fetchall()
        assert row[:4] == ("FarService", b"<order id='7'/>", False, 0)
        assert row[4].year >= 2027  # a datetime, as psycopg parses PostgreSQL's timestamp
        states = conn.execute("SELECT database_name, state_desc FROM "
                              "sys.conversation_endpoints ORDER BY database_name, "
                              "far_service").fetchall()
        assert states == [("A", "CONVERSING"), ("A", "CONVERSING"), ("B", "CONVERSING")]


def test_psycopg_parameterised_queries(server):
    port, _, _ = server
    with connect(port, autocommit=True) as conn:
        rows = conn.execute("SELECT name, address, route_id FROM sys.routes WHERE "
                            "database_name = %s AND address <> %s ORDER BY name",
                            ["A", "LOCAL"]).fetchall()
        assert rows == [("FarRoute", "TCP://far.example:4022", 65539)]
        (decision,) = conn.execute("SELECT outcome, route FROM route_decision(%s, %s)",
                                   ["A", "FarService"]).fetchall()
        assert decision == ("send", "FarRoute")
        cur = conn.cursor()
        for name in ("SA", "SB"):  # a prepared statement, bound again
            cur.execute("SELECT count(*) FROM sys.services WHERE name = %s", [name],
                        prepare=True)
            assert cur.fetchone() == (1,)
        assert conn.execute("SELECT %s::INTEGER * 2, %s, %s", [21, None, b"\x00\xff"]
                            ).fetchone() == (42, None, b"\x00\xff")


def test_psycopg_write_is_refused_and_the_transaction_fails_until_rollback(server):
    port, _, _ = server
    with connect(port) as conn:  # not autocommit: psycopg sends BEGIN first
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction) as refused:
            conn.execute("UPDATE sys.routes SET address = %s", ["TCP://evil:1"])
        assert refused.value.sqlstate == "25006"
        assert "read-only" in str(refused.value)
        with pytest.raises(psycopg.errors.InFailedSqlTransaction):
            conn.execute("SELECT 1")
        conn.rollback()
        assert conn.execute("SELECT count(*) FROM sys.routes WHERE address = 'TCP://evil:1'"
                            ).fetchone() == (0,)
        with pytest.raises(psycopg.errors.UndefinedTable):
            conn.execute("SELECT * FROM no_such_view")
        conn.rollback()
        with pytest.raises(psycopg.errors.SyntaxError):
            conn.execute("SELEC 1")


def test_psycopg_with_a_wrong_password_is_refused(server):
    port, _, log = server
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        connect(port, password="wrong")
    # the operator watching serve sees the refusal too (the line comes as the session ends)
    line = wait_until(lambda: next((x for x in log.read_text().splitlines()
                                    if x.startswith("postgresql client refused (127.0.0.1:")),
                                   None), what="the refusal on serve's stderr")
    assert line.endswith('password authentication failed for user "analyst"'), line


# -- in process: the component, its limits and its options ---------------------------------


def test_pg_server_component_start_stop_and_connection_limit(tmp_path):
    build_instance(tmp_path / "i.duckdb")
    with pybroker.connect(tmp_path / "i.duckdb", worker=False) as inst:
        server = PgServer(inst, "127.0.0.1", 0, PASSWORD, max_connections=1).start()
        try:
            with connect(server.port, autocommit=True) as conn:
                assert conn.execute("SELECT count(*) FROM sys.queue_messages").fetchone() == (1,)
                with pytest.raises(psycopg.OperationalError, match="too many clients"):
                    connect(server.port)
        finally:
            server.stop()
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", server.port), timeout=5).close()


def test_serve_needs_a_private_password(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv(PASSWORD_ENV, raising=False)
    path = tmp_path / "s.duckdb"
    assert main(["serve", str(path), "--port", "0", "--pg-port", "0", "--create"]) == 1
    assert f"--pg-password-file FILE, or set ${PASSWORD_ENV}" in capsys.readouterr().err
    open_to_all = tmp_path / "pw"
    open_to_all.write_text("x\n")
    open_to_all.chmod(0o644)
    assert main(["serve", str(path), "--port", "0", "--pg-port", "0", "--create",
                 "--pg-password-file", str(open_to_all)]) == 1
    assert "chmod 600" in capsys.readouterr().err
    assert not path.exists()  # refused before the instance was opened


# -- the protocol core ----------------------------------------------------------------------


def test_scram_sha_256_matches_rfc_7677():
    exchange = wire.ScramExchange(
        "pencil", salt=base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ=="),
        nonce="%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    first = exchange.server_first(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                     b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    final = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
             b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert exchange.server_final(final) == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    wrong = final[:-8] + b"AAAAAAA="
    assert exchange.server_final(wrong) is None


class _NoQueries:
    def sql(self, query, params=None):  # pragma: no cover - never reached unauthenticated
        raise AssertionError("a query ran before authentication")


@settings(max_examples=300, deadline=None)
@given(chunks=st.lists(st.binary(max_size=64), max_size=6),
       startup=st.booleans())
def test_hostile_bytes_never_break_a_session(chunks, startup):
    written: list[bytes] = []
    session = PgSession(_NoQueries(), PASSWORD, written.append)
    if startup:  # a valid startup packet first, then garbage where SASL should be
        params = b"user\0x\0\0"
        session.receive((len(params) + 8).to_bytes(4, "big")
                        + wire.PROTOCOL_3_0.to_bytes(4, "big") + params)
    for chunk in chunks:
        if session.closed:
            break
        session.receive(chunk)  # never raises: replies, or ends with a FATAL error
    assert not session.authenticated
    for reply in written:
        assert reply[:1] in (b"R", b"E", b"N", b"v")
