"""`pybroker serve` checks every argument before it opens the file or listens: a bad one
is a clear error naming the option, a non-zero exit, and the file's bytes are unchanged
(no "Listening" event, no FILE.sock, no FILE.token). And the endpoint it serves is in
sys.service_broker_endpoints and sys.tcp_endpoints while it runs, when the file defines
none. (A client's wrong token: tests/test_server_clients.py says where the token is.)"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pybroker
from pybroker.cli.main import main
from tests.process_helpers import ROOT, Served, child_env, free_ports


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def instance_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("serve") / "stock.duckdb"
    with pybroker.connect(path, worker=False) as inst:
        inst.create_database("Stock")
    return path


def left_alone(path: Path, before: str) -> None:
    assert digest(path) == before
    assert not Path(f"{path}.sock").exists()
    assert not path.with_suffix(".token").exists() and not Path(f"{path}.token").exists()


BAD = [
    (["--client-port", "99999"], "--client-port must be a whole number from 0 to 65,535"),
    (["--port", "65536"], "--port must be a whole number from 0 to 65,535"),
    (["--pg-port", "-1"], "--pg-port must be a whole number from 0 to 65,535"),
    (["--max-clients", "0"], "--max-clients must be a positive whole number"),
    (["--client-timeout", "-5"], "--client-timeout must be a number from"),
    (["--summary-interval", "0"], "--summary-interval must be a number from"),
    (["--idle-timeout", "0"], "--idle-timeout must be a number from"),
    (["--probe-timeout", "nan"], "--probe-timeout must be a finite number"),
    (["--retry-scale", "0"], "--retry-scale must be a number from"),
    (["--host", ""], "--host must not be empty"),
    (["--client-host", ""], "--client-host must not be empty"),
    (["--threads", "0"], "threads"),
    (["--memory-limit", "lots"], "memory"),
]


@pytest.mark.parametrize(("options", "said"), BAD, ids=[" ".join(o) for o, _ in BAD])
def test_a_bad_option_is_refused_before_anything_starts(instance_file, capsys, options,
                                                        said):
    before = digest(instance_file)
    assert main(["serve", str(instance_file), "--client-port", "0", *options]) != 0
    err = capsys.readouterr().err
    assert said in err, err
    left_alone(instance_file, before)


def test_a_trusted_peer_that_is_not_a_certificate_is_refused_first(instance_file, capsys,
                                                                  tmp_path):
    pem = tmp_path / "peer.pem"
    pem.write_text("not a certificate\n")
    before = digest(instance_file)
    assert main(["serve", str(instance_file), "--trust", f"Peer={pem}"]) != 0
    assert f"--trust Peer={pem}" in capsys.readouterr().err
    left_alone(instance_file, before)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(option=st.sampled_from(["--port", "--client-port", "--pg-port"]),
       port=st.integers(max_value=-1) | st.integers(min_value=65536))
def test_any_port_out_of_range_is_refused_for_every_port_option(instance_file, capsys,
                                                                option, port):
    before = digest(instance_file)
    assert main(["serve", str(instance_file), option, str(port)]) != 0
    assert f"{option} must be a whole number from 0 to 65,535" in capsys.readouterr().err
    left_alone(instance_file, before)


def test_a_real_serve_with_a_bad_client_port_exits_without_listening(instance_file):
    before = digest(instance_file)
    proc = subprocess.run(
        [sys.executable, "-m", "pybroker", "serve", str(instance_file), "--port", "0",
         "--client-port", "99999"], cwd=ROOT, env=child_env(), capture_output=True,
        text=True, timeout=120)
    assert proc.returncode == 1
    assert "--client-port must be a whole number from 0 to 65,535, not 99999" in proc.stderr
    assert "listening" not in proc.stdout
    left_alone(instance_file, before)


def test_the_endpoint_serve_runs_is_in_the_endpoint_views(tmp_path):
    path = tmp_path / "served.duckdb"
    pybroker.connect(path, worker=False).close()  # no CREATE ENDPOINT: serve's defaults
    (port,) = free_ports(1)
    served = Served(path, port)
    try:
        served.start()
        served.ready()
        assert served.sql("SELECT name, state_desc, connection_auth_desc "
                          "FROM sys.service_broker_endpoints") == [
            ("DefaultBrokerEndpoint", "STARTED", "CERTIFICATE")]
        assert served.sql("SELECT port, ip_address FROM sys.tcp_endpoints") == [
            (port, "127.0.0.1")]
        served.stop()
    finally:
        served.close()
    with pybroker.connect(path, read_only=True) as after:  # stopped: not listening
        assert after.sql("SELECT count(*) FROM sys.service_broker_endpoints").fetchone() == (
            0,)



URLSAFE = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
REST = st.text(URLSAFE, min_size=42, max_size=42)


@given(st.lists(REST.map(lambda rest: "-" + rest), max_size=5),
       st.tuples(st.sampled_from(URLSAFE.replace("-", "")), REST).map("".join))
def test_a_new_token_never_starts_with_a_dash(dashed, plain):
    """`pybroker sql ADDRESS --token TOKEN` reads a token starting with "-" as an option:
    a new token is drawn again until it does not."""
    from pybroker.server import server

    drawn = iter([*dashed, plain])
    real = server.secrets.token_urlsafe
    server.secrets.token_urlsafe = lambda n: next(drawn)
    try:
        assert server.new_token() == plain
    finally:
        server.secrets.token_urlsafe = real
    assert not server.new_token().startswith("-")
    assert len(server.new_token()) == 43  # 32 bytes
