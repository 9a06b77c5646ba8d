"""T-SQL through a served instance: what ``execute()`` returns (the result sets and the lines
PRINT wrote, ``BatchResults.messages``) reaches a client of ``pybroker serve`` whole, through
the socket beside the file and through the TCP port, and a failed batch's error carries
what it printed before it failed; ``pybroker sql pybroker://HOST:PORT --token`` and ``pybroker
sql FILE`` of a served file write the PRINT lines to stderr."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from decimal import Decimal

import pytest

import pybroker
from pybroker.api.served.paths import token_path_for
from tests.process_helpers import ROOT, Served, child_env, free_ports

BATCH = "PRINT 'one'; SELECT 7 AS seven; PRINT N'two ' + CAST(2 AS NVARCHAR(5))"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    path = tmp_path_factory.mktemp("served") / "served.duckdb"
    with pybroker.connect(path, worker=False) as inst:
        inst.create_database("A").execute("CREATE QUEUE Q; CREATE SERVICE S ON QUEUE Q")
    broker_port, client_port = free_ports(2)
    served = Served(path, broker_port, "--client-port", client_port)
    try:
        served.start()
        served.ready()
        served.wait_for(f"clients on pybroker://127.0.0.1:{client_port}", 60)
        token = token_path_for(path).read_text().strip()
        yield served, f"pybroker://127.0.0.1:{client_port}", token
        served.stop()
    finally:
        served.close()


def _sql(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pybroker", "sql", *map(str, args)],
                          cwd=ROOT, env=child_env(), capture_output=True, text=True,
                          timeout=120)


def test_a_client_gets_the_messages_beside_the_result_sets(server):
    served, address, token = server
    for inst in (pybroker.connect(served.file), pybroker.connect(address, token=token)):
        with inst:
            results = inst.database("A").execute(BATCH)
            assert results.messages == ["one", "two 2"]
            assert [(r.columns, r.rows) for r in results] == [(("seven",), [(7,)])]
            assert inst.execute("USE A; PRINT DB_ID()").messages == [
                str(inst.database("A").database_id)]


def test_a_failed_batch_carries_what_it_printed_to_the_client(server):
    served, _, _ = server
    with pybroker.connect(served.file) as inst:
        with pytest.raises(pybroker.BrokerError, match="THROW at line 2, column 1 failed: no"
                           ) as caught:
            inst.database("A").execute("PRINT 'before'; SELECT 1 AS one\nTHROW 50001, N'no', 1")
        assert caught.value.results.messages == ["before"]
        assert [r.rows for r in caught.value.results] == [[(1,)]]
        assert caught.value.number == 50001


def test_pybroker_sql_prints_the_lines_through_the_server(server):
    served, address, token = server
    by_address = _sql(address, "--token", token, "-d", "A", BATCH)
    assert by_address.returncode == 0, by_address.stderr
    assert by_address.stderr.splitlines() == ["one", "two 2"]
    assert "seven" in by_address.stdout and "7" in by_address.stdout
    by_file = _sql(served.file, "-d", "A", "PRINT 'through the socket'")
    assert (by_file.returncode, by_file.stderr.splitlines()) == (0, ["through the socket"])
    refused = _sql(address, "--token", "wrong", "-d", "A", "PRINT 1")
    assert refused.returncode != 0 and "no token or a wrong token" in refused.stderr


def test_spid_is_the_client_connection_s_number(server):
    _, address, token = server
    with pybroker.connect(address, token=token) as one, pybroker.connect(
            address, token=token) as two:
        database = one.database("A")
        [first] = database.execute("PRINT @@SPID").messages
        assert database.execute("PRINT @@SPID").messages == [first]  # one connection
        [second] = two.database("A").execute("PRINT @@SPID").messages
        assert int(first) >= 51 and second != first
        [row] = one.database("A").execute(
            "SELECT CAST('2026-01-02 03:04:05' AS DATETIME2(0)) AS at, 1.50 AS d")[0].rows
        assert row == (dt.datetime(2026, 1, 2, 3, 4, 5), Decimal("1.50"))  # over the wire
