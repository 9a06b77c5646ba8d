"""An instance file written by pybroker opens in the DuckDB CLI of the duckdb-cli package
(the test extra installs it), and the route macros answer there with no Python involved."""

from __future__ import annotations

import csv
import io
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

import pybroker
from pybroker.devtools.demos.routing import build_example, load_examples

pytestmark = pytest.mark.cli


def duckdb_binary() -> str:
    beside = Path(sys.executable).with_name("duckdb")
    found = str(beside) if beside.exists() else shutil.which("duckdb")
    assert found, "the duckdb CLI is missing: pip install duckdb-cli (it is in the test extra)"
    return found


def cli(path: Path, query: str) -> list[dict[str, str]]:
    done = subprocess.run(
        [duckdb_binary(), "-readonly", "-csv", str(path), "-c", query],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return list(csv.DictReader(io.StringIO(done.stdout)))


@pytest.fixture(scope="module")
def instance_file(tmp_path_factory):
    examples = {e.number: e for e in load_examples()}
    path = tmp_path_factory.mktemp("cli") / "broker.duckdb"
    with pybroker.connect(path) as inst:
        build_example(inst, examples[6])  # msdb ForwardingRoute, forwarding on
        db = inst.database("AdventureWorks2008R2")
        for route in examples[5].routes["AdventureWorks2008R2"][1:]:  # the balanced routes
            db.create_route(route["name"], service_name=route["remote_service_name"],
                            broker_instance=route["broker_instance"], address=route["address"])
    return path


def test_the_cli_is_the_1_5_line():
    done = subprocess.run([duckdb_binary(), "--version"], capture_output=True, text=True,
                          timeout=60)
    assert done.stdout.startswith("v1.5."), done.stdout
    # the library that wrote the file and the CLI that reads it are the same line
    assert duckdb.__version__.startswith("1.5."), duckdb.__version__


def test_route_decision_in_the_cli(instance_file):
    (row,) = cli(instance_file,
                 "SELECT * FROM route_decision('AdventureWorks2008R2', 'InventoryService')")
    assert (row["outcome"], row["route"], row["database"], row["match_step"],
            row["choose_step"], row["locate_step"]) == (
        "deliver", "AutoCreatedLocal", "AdventureWorks2008R2", "R2.5", "R3.2", "R4.2")
    (row,) = cli(instance_file, "SELECT * FROM route_decision('outside', 'ElsewhereService')")
    assert (row["outcome"], row["route"], row["address"]) == (
        "send", "ForwardingRoute", "tcp://elsewhere.Adventure-Works.com:4022/")
    (row,) = cli(instance_file, "SELECT * FROM route_decision('outside', 'InventoryService')")
    assert (row["outcome"], row["route"], row["database"]) == (
        "deliver", "AutoCreatedLocal", "AdventureWorks2008R2")  # LOCAL before forwarding
    (row,) = cli(instance_file, "SELECT * FROM route_decision('AdventureWorks2008R2', "
                 "'BalancedService', broker_instance := '81B1D3D0-288E-4D2C-B1D3-456CBB944B4F')")
    assert (row["route"], row["match_step"]) == ("BalancedRouteTwo", "R2.1")


def test_route_explain_in_the_cli(instance_file):
    rows = cli(instance_file,
               "SELECT step, result, candidates FROM route_explain('AdventureWorks2008R2', "
               "'BalancedService')")
    by_step = {r["step"]: r for r in rows}
    assert [r["step"] for r in rows][:7] == [f"R2.{i}" for i in range(1, 8)]
    assert by_step["R2.3"]["result"] == "matched"
    assert "BalancedRouteOne" in by_step["R2.3"]["candidates"]
    assert by_step["R3.3"]["result"] == "chosen"


def test_catalog_views_in_the_cli(instance_file):
    rows = cli(instance_file, "SELECT database_name, name, address, is_expired FROM sys.routes "
                              "ORDER BY database_name, name")
    names = [(r["database_name"], r["name"]) for r in rows]
    assert ("msdb", "ForwardingRoute") in names
    assert ("AdventureWorks2008R2", "BalancedRouteTwo") in names
    assert {r["is_expired"] for r in rows} == {"false"}
    msdb = cli(instance_file, "SELECT name FROM sys.msdb_routes ORDER BY name")
    assert [r["name"] for r in msdb] == ["AutoCreatedLocal", "ForwardingRoute"]
    services = cli(instance_file, "SELECT name FROM sys.services ORDER BY name")
    assert [r["name"] for r in services] == ["ElsewhereService", "InventoryService"]
    one = cli(instance_file, "SELECT name FROM routes_of('AdventureWorks2008R2') ORDER BY name")
    assert [r["name"] for r in one] == [
        "AutoCreatedLocal", "BalancedRouteOne", "BalancedRouteTwo"]
    databases = cli(instance_file, "SELECT name FROM sys.databases ORDER BY name")
    assert [r["name"] for r in databases] == ["AdventureWorks2008R2", "master", "msdb"]
    queues = cli(instance_file, "SELECT database_name, is_receive_enabled "
                                "FROM sys.service_queues")
    assert queues and {r["is_receive_enabled"] for r in queues} == {"true"}
    (settings,) = cli(instance_file, "SELECT is_forwarding_enabled FROM instance_settings")
    assert settings["is_forwarding_enabled"] == "true"  # example 6


def test_conversation_views_in_the_cli(tmp_path):
    """C1, C4, C3: endpoints, the transmission queue and queue contents read in the CLI."""
    path = tmp_path / "conversations.duckdb"
    with pybroker.connect(path, worker=False) as inst:
        a = inst.create_database("A")
        b = inst.create_database("B")
        a.create_queue("QA")
        a.create_service("SA", queue="QA")
        b.create_queue("QB")
        b.create_service("SB", queue="QB", contracts=["DEFAULT"])
        conv = a.begin_dialog("SA", "SB")
        conv.send("hello")
        a.begin_dialog("SA", "Nowhere").send(b"waits")
    rows = cli(path, "SELECT database_name, is_initiator, state, state_desc, send_sequence, "
                     "receive_sequence FROM sys.conversation_endpoints "
                     "ORDER BY database_name, far_service")
    assert [tuple(r.values()) for r in rows] == [
        ("A", "true", "CO", "CONVERSING", "1", "0"),
        ("A", "true", "CO", "CONVERSING", "1", "0"),
        ("B", "false", "CO", "CONVERSING", "0", "1"),
    ]
    (tq,) = cli(path, "SELECT to_service_name, message_sequence_number, transmission_status "
                      "FROM sys.transmission_queue")
    assert (tq["to_service_name"], tq["message_sequence_number"]) == ("Nowhere", "0")
    assert tq["transmission_status"].startswith("The target service name could not be found")
    (msg,) = cli(path, "SELECT status, message_type_name, casted_message_body "
                       "FROM queue_contents('B', 'QB')")
    assert (msg["status"], msg["message_type_name"], msg["casted_message_body"]) == (
        "1", "DEFAULT", "hello")
    usages = cli(path, "SELECT service_contract_name, message_type_name FROM "
                       "sys.service_contract_message_usages WHERE database_name = 'B' "
                       "AND service_contract_name = 'DEFAULT'")
    assert usages == [{"service_contract_name": "DEFAULT", "message_type_name": "DEFAULT"}]
    (mt,) = cli(path, "SELECT validation_desc FROM sys.service_message_types WHERE "
                      "database_name = 'A' AND name LIKE '%/Error'")
    assert mt["validation_desc"] == "XML"
