"""The command line never ends in a traceback. Every error is one line on stderr
with exit code 1 (2 for usage), whatever the arguments or stdin hold; a closed pipe stops
the command quietly; names follow SQL Server's default collation."""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import pybroker
from pybroker import AlreadyExistsError, RouteDefinitionError
from tests.cli_helpers import call, rows_digest, run

GENERATED = settings(max_examples=25, derandomize=True, deadline=None, database=None,
                     phases=[Phase.explicit, Phase.generate],  # each example runs commands
                     suppress_health_check=[HealthCheck.function_scoped_fixture,
                                            HealthCheck.too_slow])
ROOT = Path(__file__).parents[1]


@pytest.fixture(scope="module")
def instance_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "broker.duckdb"
    with pybroker.connect(path, worker=False) as inst:
        inst.create_database("Shop").create_queue("Q")
    return path



def one_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("pybroker: "), err
    return lines[0]



def not_utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


@settings(GENERATED, max_examples=4)
@given(raw=st.binary(min_size=1, max_size=12).filter(not_utf8))
def test_arguments_that_are_not_utf8_give_one_line(instance_file, capsys, raw):
    """Python hands undecodable argument bytes over as lone surrogates (surrogateescape);
    every place a name goes refuses them with one line, and nothing is written."""
    text = os.fsdecode(raw)
    before = rows_digest(instance_file)
    file = str(instance_file)
    for argv in (["create-database", file, text], ["create-queue", file, "-d", "Shop", text],
                 ["create-service", file, "-d", "Shop", text, "--queue", "Q"],
                 ["routes", file, "-d", text], ["route", file, text, "--origin", "Shop"],
                 ["route", file, "S", "--origin", text],
                 ["sql", file, "-d", "Shop", f"DROP ROUTE [{text}]"]):
        code, _, err = call(argv, capsys)
        assert code == 1, (argv, err)
        one_line(err)
    assert rows_digest(instance_file) == before


@settings(GENERATED, max_examples=10)
@given(raw=st.one_of(
    st.binary(max_size=40),
    st.sampled_from(["DROP ROUTE [R\u00e9]", "CREATE QUEUE [Q\u00e9]; DROP QUEUE Q"]).map(
        lambda s: s.encode("latin-1")),
))
def test_stdin_that_is_not_utf8_gives_one_line(instance_file, capsys, monkeypatch, raw):
    before = rows_digest(instance_file)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(raw)))
    code, _, err = call(["sql", str(instance_file), "-d", "Shop", "-"], capsys)
    assert code == 1  # nothing these bytes say runs cleanly: each is refused
    line = one_line(err)
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        assert "stdin is not UTF-8 text: byte 0x" in line
    assert rows_digest(instance_file) == before


def file_bytes(path: Path) -> tuple[str, int, bool]:
    """The instance file's bytes as they lie: their hash, its modification time, and
    whether a write-ahead log stands beside it (opening for writing makes these change)."""
    return (hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns,
            Path(f"{path}.wal").exists())


def unparsable(text: str) -> bool:
    from pybroker.core.tsql.batches import parse_batches
    from pybroker.errors import BrokerError

    try:
        parse_batches(text)
    except BrokerError:
        return True
    return False


BAD_BATCHES = st.one_of(
    st.sampled_from(["CREATE ROUTEE R1", "SELEC 1", "CREATE ROUTE R1 WITH ADRESS = 'LOCAL'",
                     "CREATE ROUTE R1 WITH ADDRESS = 'LOCAL' GO", "DROP ROUTE", "BEGIN DIALOG",
                     "CREATE QUEUE Q WITH STATUS = MAYBE", "CREATE TABLE t (x int)", ";",
                     "CREATE ROUTE R1 WITH ADDRESS = 'LOCAL'; CREATE ROUTEE R2",
                     "CREATE ENDPOINT E AS TCP (LISTENER_PORT = 4022) FOR SERVICE_BROKER"]),
    st.builds("{} {}".format, st.sampled_from(["CREATE ROUTE", "ALTER QUEUE", "DROP", "SEND ON",
                                               "DECLARE", "END CONVERSATION", "WAITFOR"]),
              st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=16)),
).filter(unparsable)


@settings(GENERATED, max_examples=20)
@given(batch=BAD_BATCHES)
def test_a_batch_that_does_not_parse_leaves_the_file_as_it_lies(tmp_path, capsys, batch):
    """A batch is parsed before the file is opened for writing (which would rewrite the
    catalog's views and macros): a refused one leaves the bytes of the file as they were."""
    path = tmp_path / "parse.duckdb"
    if not path.exists():
        with pybroker.connect(path, worker=False) as inst:
            inst.create_database("Shop")
    before = file_bytes(path)
    code, _, err = call(["sql", str(path), "-d", "Shop", batch], capsys)
    assert code == 1
    one_line(err)
    assert file_bytes(path) == before


def test_a_batch_that_parses_still_runs_after_one_that_did_not(tmp_path, capsys):
    path = tmp_path / "parse.duckdb"
    with pybroker.connect(path, worker=False) as inst:
        inst.create_database("Shop")
    before = file_bytes(path)
    assert call(["sql", str(path), "-d", "Shop", "CREATE ROUTEE R1"], capsys)[0] == 1
    assert file_bytes(path) == before
    code, out, err = call(["sql", str(path), "-d", "Shop",
                           "CREATE ROUTE R1 WITH ADDRESS = 'LOCAL'"], capsys)
    assert (code, out, err) == (0, "ok: the batch ran in Shop\n", "")
    assert file_bytes(path) != before
    with pybroker.connect(path, read_only=True, worker=False) as inst:
        assert [r.name for r in inst.database("Shop").routes()] == ["AutoCreatedLocal", "R1"]
    # a statement of master's only, in another database: refused with the hint, unopened
    before = file_bytes(path)
    code, _, err = call(["sql", str(path), "-d", "Shop", "DROP ENDPOINT E"], capsys)
    assert code == 1 and "run it with -d master" in err
    assert file_bytes(path) == before


def test_the_real_command_with_bytes(instance_file, tmp_path):
    before = rows_digest(instance_file)
    done = run("create-database", str(instance_file), b"db\xff", text=False)
    assert done.returncode == 1
    assert one_line(done.stderr.decode()) == (
        "pybroker: error: database name is not valid text: it contains the lone surrogate "
        "U+DCFF (at position 2), which is not valid Unicode and cannot be encoded as UTF-8 "
        "(on the command line this is an argument that is not UTF-8)")
    latin1 = "CREATE QUEUE [Caf\u00e9]".encode("latin-1")
    done = run("sql", str(instance_file), "-d", "Shop", "-", stdin=latin1, text=False)
    assert done.returncode == 1
    assert one_line(done.stderr.decode()) == (
        "pybroker: error: stdin is not UTF-8 text: byte 0xe9 at offset 17 (line 1) cannot be "
        "decoded; save the script as UTF-8")
    assert rows_digest(instance_file) == before
    script = "CREATE QUEUE [Caf\u00e9]; DROP QUEUE [Caf\u00e9]"
    for data in (b"\xef\xbb\xbf" + script.encode(), script.encode("utf-16")):  # BOM, UTF-16
        done = run("sql", str(instance_file), "-d", "Shop", "-", stdin=data, text=False)
        assert (done.returncode, done.stderr) == (0, b"")


def test_version_and_usage_errors(capsys):
    code, out, _ = call(["--version"], capsys)
    assert (code, out.strip()) == (0, f"pybroker {pybroker.__version__}")
    for argv in (["routes"], ["nonsense"], ["route", "f", "S"], ["fuzz", "tsql", "--count",
                                                                  "x"]):
        code, _, err = call(argv, capsys)
        assert code == 2
        assert "usage error" in one_line(err)
    code, out, _ = call(["sql", "--help"], capsys)
    assert code == 0 and "MESSAGE TYPE, QUEUE and SERVICE" in out


def test_a_closed_pipe_stops_the_command_quietly():
    with subprocess.Popen([sys.executable, "-m", "pybroker", "demo"], cwd=ROOT,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE) as demo:
        assert demo.stdout.readline().startswith(b"Example 1")
        demo.stdout.close()  # as `| head -1` does
        err = demo.stderr.read()
        assert demo.wait(timeout=120) == 1
    assert err == b""


def test_address_errors_say_what_is_wrong(instance_file, capsys):
    reasons = {
        "tcp://x": "the port is missing",
        "tcp://x:0": "the port 0 is outside 1-65535",
        "tcp://x:99999": "the port 99999 is outside 1-65535",
        "tcp://x:ab": "the port 'ab' is not a number",
        "http://x:1": "a network address begins with tcp://",
        "tcp://a b:1": "the host 'a b' is not a DNS name",
        "tcp://x:1/y": "only a trailing '/' may follow the port",
    }
    for address, reason in reasons.items():
        code, _, err = call(["sql", str(instance_file), "-d", "Shop",
                             f"CREATE ROUTE x WITH ADDRESS = '{address}'"], capsys)
        assert code == 1
        assert one_line(err).endswith(reason) or reason in err, err


def test_a_spark_master_that_is_no_url_fails_before_spark_starts(tmp_path, capsys):
    code, _, err = call(["pipeline", "resolve", "--engine", "spark", "--master", "bogus",
                         str(tmp_path), str(tmp_path / "c.parquet"), str(tmp_path / "o")],
                        capsys)
    assert code == 1
    assert one_line(err) == (
        "pybroker: error: --master 'bogus' is not a Spark master URL: use local[*], "
        "local[N], spark://host:port, yarn or k8s://https://host:port")
    code, _, err = call(["pipeline", "resolve", "--engine", "spark", "--master",
                         "spark://x:99999", str(tmp_path), str(tmp_path / "c.parquet"),
                         str(tmp_path / "o")], capsys)
    assert code == 1 and "port from 1 to 65535" in one_line(err)


def test_resolve_refuses_duplicate_conversation_ids(instance_file, tmp_path, capsys):
    rows = [{"conversation_id": cid, "origin": "Shop", "service_name": "S",
             "broker_instance": None, "begin_time": datetime(2030, 1, 1)}
            for cid in ("a", "b", "a", "c", "c", "c")]
    schema = pa.schema([("conversation_id", pa.string()), ("origin", pa.string()),
                        ("service_name", pa.string()), ("broker_instance", pa.string()),
                        ("begin_time", pa.timestamp("us"))])
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), tmp_path / "c.parquet")
    code, _, err = call(["pipeline", "resolve", str(instance_file), str(tmp_path / "c.parquet"),
                         str(tmp_path / "out")], capsys)
    assert code == 1
    assert one_line(err).endswith(
        "conversation_id must be unique, but some appear more than once: 'a' (2 rows), "
        "'c' (3 rows)")
    assert not (tmp_path / "out").exists()


def test_names_follow_the_default_collation(tmp_path, capsys):
    """Database, queue and route names are unique without regard to case; service, contract
    and message type names compare exactly (they travel between instances)."""
    path = tmp_path / "names.duckdb"
    assert call(["create-database", str(path), "Sales"], capsys)[0] == 0
    for name, existing in (("MSDB", "msdb"), ("sales", "Sales"), ("SALES", "Sales")):
        code, _, err = call(["create-database", str(path), name], capsys)
        assert code == 1
        assert one_line(err) == (
            f"pybroker: error: database '{name}' already exists as '{existing}' (database "
            "names are unique without regard to case)")
    code, _, err = call(["create-database", str(path), "OUTSIDE"], capsys)
    assert code == 1 and "'outside' (in any case) stands for messages" in one_line(err)
    with pybroker.connect(path, worker=False) as inst:
        db = inst.database("Sales")
        db.create_queue("Q")
        with pytest.raises(AlreadyExistsError, match="as 'Q'"):
            db.create_queue("q")
        db.create_route("R", address="LOCAL")
        with pytest.raises(RouteDefinitionError, match="as 'R'"):
            db.create_route("r", address="LOCAL")
        db.create_service("S", queue="Q")
        db.create_service("s", queue="Q")  # services compare exactly
        db.create_message_type("M")
        db.create_message_type("m")
        db.create_contract("C", {"M": "ANY"})
        db.create_contract("c", {"m": "ANY"})
        assert sorted(s.name for s in db.services()) == ["S", "s"]
        assert [r.name for r in db.routes()] == ["AutoCreatedLocal", "R"]
        with pytest.raises(pybroker.NotFoundError, match="did you mean 'Sales'"):
            inst.database("SALES")
