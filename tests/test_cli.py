"""The ``pybroker`` command, run as a real process: exit codes 0 / 2 (usage) / 1 (other
errors, one line on stderr) and what each subcommand prints."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.cli


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pybroker", *map(str, args)],
        capture_output=True, text=True, input=stdin, timeout=120,
    )


def test_demo_routes_every_seed_case_as_required():
    done = run("demo")
    assert done.returncode == 0, done.stderr
    assert "All 33 conversations of 7 example(s) routed as the seeds require." in done.stdout
    assert "MISMATCH" not in done.stdout
    assert done.stdout.count("why: ") == 33
    assert "send via ForwardingRoute to tcp://elsewhere.Adventure-Works.com:4022/" in done.stdout


def test_demo_keeps_an_example_in_a_new_file_and_refuses_an_existing_one(tmp_path):
    path = tmp_path / "demo.duckdb"
    done = run("demo", path, "--example", "5")
    assert done.returncode == 0, done.stderr
    assert "Example 5" in done.stdout and "Example 4" not in done.stdout
    routes = run("routes", path, "-d", "AdventureWorks2008R2", "--json")
    assert {r["name"] for r in json.loads(routes.stdout)} == {
        "AutoCreatedLocal", "BalancedRouteOne", "BalancedRouteTwo"}
    again = run("demo", path)
    assert again.returncode == 2
    assert again.stderr.strip().endswith("already exists; the demo writes only to a new file")


def test_a_dba_session(tmp_path):
    path = tmp_path / "i.duckdb"
    guid = "5fb8d92b-ed69-4c80-afbb-2aa6a7d3cb2d"
    assert run("create-database", path, "Shop", "--broker-instance", guid).returncode == 0
    assert run("create-queue", path, "-d", "Shop", "OrdersQueue").returncode == 0
    assert run("create-service", path, "-d", "Shop", "Orders", "--queue", "OrdersQueue"
               ).returncode == 0
    ddl = run("sql", path, "-d", "Shop",
              "CREATE ROUTE Parts WITH SERVICE_NAME = 'Parts', ADDRESS = 'tcp://parts:4022'")
    assert ddl.returncode == 0, ddl.stderr
    piped = run("sql", path, "-d", "Shop", "-", stdin="DROP ROUTE Parts; "
                "CREATE ROUTE Parts WITH SERVICE_NAME = 'Parts', ADDRESS = 'tcp://p2:4022'")
    assert piped.returncode == 0, piped.stderr

    decided = run("route", path, "Parts", "--origin", "Shop", "--json")
    assert decided.returncode == 0, decided.stderr
    decision = json.loads(decided.stdout)
    assert (decision["outcome"], decision["route"], decision["address"]) == (
        "send", "Parts", "tcp://p2:4022")

    local = run("route", path, "Orders", "--origin", "Shop", "--explain")
    assert local.returncode == 0
    assert local.stdout.startswith("deliver via AutoCreatedLocal to database Shop")
    assert "R2.5  matched" in local.stdout and "R3.2  chosen" in local.stdout

    listed = run("databases", path, "--json")
    assert {"name": "Shop", "database_id": 5, "broker_instance": guid} in json.loads(
        listed.stdout)
    forwarding = run("forwarding", path, "on", "--size-mb", "20")
    assert forwarding.stdout.strip() == "forwarding on (memory bound 20 MB)"
    assert run("forwarding", path).stdout.strip() == "forwarding on (memory bound 20 MB)"


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (("route",), 2, "the following arguments are required"),
        (("forwarding", "x.duckdb", "maybe"), 2, "invalid choice"),
        (("frobnicate",), 2, "invalid choice"),
        (("route", "{missing}", "S", "--origin", "A"), 1, "no instance file at"),
        (("create-database", "{file}", ""), 1, "database name must not be empty"),
        (("create-database", "{file}", "A", "--broker-instance", "nope"), 1, "not a GUID"),
        (("sql", "{file}", "-d", "master", "SELECT 1"), 1, "CREATE/ALTER/DROP ROUTE"),
        (("sql", "{file}", "-d", "Nope", "DROP ROUTE x"), 1, "database 'Nope' does not exist"),
        (("route", "{file}", "S", "--origin", "Nope"), 1, "neither a database"),
    ],
)
def test_errors_exit_with_a_code_and_one_line(tmp_path, args, code, message):
    path = tmp_path / "i.duckdb"
    run("create-database", path, "Seed")
    args = [a.format(file=path, missing=tmp_path / "missing.duckdb") for a in args]
    done = run(*args)
    assert done.returncode == code
    if code == 1:
        assert len(done.stderr.strip().splitlines()) == 1
        assert done.stderr.startswith("pybroker: error: ")
    assert message in done.stderr


def test_not_a_duckdb_file(tmp_path):
    path = tmp_path / "x.duckdb"
    path.write_text("hello")
    done = run("routes", path)
    assert done.returncode == 1
    assert "not a DuckDB database file" in done.stderr


def test_bench_routing_quick_smoke():
    done = run("bench", "routing", "--quick", "--repeat", "1", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["batch"]["conversations"] == 50_000
    assert report["warm"]["p50_us"] > 0 and report["cold"]["unseen_key_ms"] > 0
