"""The ``pybroker`` command, run as a real process: exit codes 0 / 2 (usage) / 1 (other
errors, one line on stderr) and what each subcommand prints."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import pybroker
from tests.cli_helpers import run

pytestmark = pytest.mark.cli


@pytest.fixture(scope="module")
def demo() -> subprocess.CompletedProcess[str]:
    """One whole ``pybroker demo`` (it starts instance processes: run it once per module)."""
    return subprocess.run([sys.executable, "-m", "pybroker", "demo"], capture_output=True,
                          text=True, timeout=300)


def test_demo_routes_every_seed_case_as_required(demo):
    done = demo
    assert done.returncode == 0, done.stderr
    assert "All 33 conversations of 7 example(s) routed as the seeds require." in done.stdout
    assert "MISMATCH" not in done.stdout
    assert done.stdout.count("why: ") == 33
    assert "send via ForwardingRoute to tcp://elsewhere.Adventure-Works.com:4022/" in done.stdout
    # once, where the codes of the why: lines are explained (pybroker explain)
    assert done.stdout.count("Step codes such as R2.3 are explained by: pybroker explain") == 1


def test_pybroker_demo_ends_with_the_two_instances_and_the_cases_across_processes(demo):
    done = demo
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.index("Conversation: Shop's OrderService") < out.index("Two instances, each "
                                                                       "in its own file")
    assert "B: RECEIVE FROM StockQueue -> 3 messages, sequence 0, 1, 2" in out
    # then the seed's examples 6 and 3 and dynamic routing across instance processes
    two = out.index("Two instances, each in its own file")
    assert two < out.index("Example 6 across processes") < out.index(
        "Dynamic routing across processes") < out.index("Example 3 across processes")
    assert "B: RECEIVE FROM ElsewhereQueue -> <Shipment id='6'/>" in out
    assert "B: RECEIVE FROM RemoteOnlyQueue -> <Order id='8'/>" in out
    assert "M: RECEIVE FROM PartsQueue -> <PartsOrder n='2'/>" in out
    assert out.rstrip().endswith("All 33 conversations of 7 example(s) routed as the seeds "
                                 "require.")


def _table(out: str, after: str, header: str) -> list[list[str]]:
    """The rows the demo printed under the first table with ``header`` after ``after``."""
    lines = out[out.index(after):].splitlines()
    start = next(i for i, line in enumerate(lines) if line.split() == header.split())
    rows = []
    for line in lines[start + 1:]:
        if not line.startswith("      ") or line.strip() == "(no rows)":
            break
        rows.append(line.split(None))
    return rows


def test_demo_runs_a_conversation_and_shows_what_an_analyst_sees(demo):
    done = demo
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.index("Example 7") < out.index("Conversation: Shop's OrderService -> "
                                              "Warehouse's StockService")
    endpoints = ("database_name service_name far_service is_initiator state_desc "
                 "send_sequence receive_sequence")
    # C1: after three SENDs, both sides CONVERSING with their sequence numbers
    assert _table(out, "three SENDs", endpoints) == [
        ["Shop", "OrderService", "StockService", "True", "CONVERSING", "3", "0"],
        ["Warehouse", "StockService", "OrderService", "False", "CONVERSING", "0", "3"]]
    queue = ("database_name queue_name status_desc message_sequence_number "
             "message_type_name casted_message_body")
    assert [r[:5] for r in _table(out, "three SENDs", queue)] == [
        ["Warehouse", "StockQueue", "READY", str(n), "StockRequest"] for n in range(3)]
    assert "RECEIVE TOP (10) FROM StockQueue -> 3 messages, sequence 0, 1, 2" in out
    assert "RECEIVE FROM OrderQueue -> StockReply, EndDialog" in out
    # both sides ended: CLOSED, the reply and the EndDialog counted (P3.1)
    assert _table(out, "END CONVERSATION, COMMIT\n    SELECT", endpoints) == [
        ["Shop", "OrderService", "StockService", "True", "CLOSED", "3", "2"],
        ["Warehouse", "StockService", "OrderService", "False", "CLOSED", "2", "3"]]
    # C4: the message to a service not yet created waits, with its status in words...
    waiting = _table(out, "which no database has yet", "database_name from_service_name "
                     "to_service_name message_sequence_number message_type_name message_body "
                     "transmission_status")
    assert len(waiting) == 1 and waiting[0][:5] == [
        "Shop", "OrderService", "BillingService", "0", "DEFAULT"]
    assert "The target service name could not be found." in " ".join(waiting[0])
    # ... and is delivered when the service is created
    after = out[out.index("CREATE SERVICE BillingService"):]
    assert "      (no rows)" in after
    assert [r[:5] for r in _table(after, "sys.queue_messages", queue)] == [
        ["Warehouse", "BillingQueue", "READY", "0", "DEFAULT"]]


def test_demo_file_keeps_the_conversation_databases_for_the_duckdb_cli(tmp_path):
    path = tmp_path / "demo.duckdb"
    done = run("demo", path)
    assert done.returncode == 0, done.stderr
    assert "SELECT database_name, service_name, state_desc, far_service FROM " in done.stdout
    listed = json.loads(run("databases", path, "--json").stdout)
    assert {"AdventureWorks2008R2", "Shop", "Warehouse"} <= {d["name"] for d in listed}
    with pybroker.connect(path, worker=False) as inst:
        rows = inst.sql("SELECT database_name, service_name, state_desc FROM "
                        "sys.conversation_endpoints ORDER BY ALL").fetchall()
    assert rows == [("Shop", "OrderService", "CLOSED"), ("Shop", "OrderService", "CONVERSING"),
                    ("Warehouse", "BillingService", "CONVERSING"),
                    ("Warehouse", "StockService", "CLOSED")]


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


@pytest.fixture(scope="module")
def seeded_file(tmp_path_factory) -> Path:
    """A file made by `pybroker create-database FILE Seed` (once: each test takes a copy)."""
    path = tmp_path_factory.mktemp("seeded") / "i.duckdb"
    done = run("create-database", path, "Seed")
    assert done.returncode == 0, done.stderr
    return path


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (("route",), 2, "the following arguments are required"),
        (("forwarding", "x.duckdb", "maybe"), 2, "invalid choice"),
        (("frobnicate",), 2, "invalid choice"),
        (("route", "{missing}", "S", "--origin", "A"), 1, "no instance file at"),
        (("create-database", "{file}", ""), 1, "database name must not be empty"),
        (("create-database", "{file}", "A", "--broker-instance", "nope"), 1, "not a GUID"),
        (("sql", "{file}", "-d", "master", "MERGE t USING s ON 1 = 1"), 1,
         "CREATE/ALTER/DROP ROUTE"),
        (("sql", "{file}", "-d", "Nope", "DROP ROUTE x"), 1, "database 'Nope' does not exist"),
        (("route", "{file}", "S", "--origin", "Nope"), 1, "neither a database"),
    ],
)
def test_errors_exit_with_a_code_and_one_line(tmp_path, seeded_file, args, code, message):
    path = tmp_path / "i.duckdb"
    shutil.copyfile(seeded_file, path)
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


def test_bench_messaging_quick_smoke():
    done = run("bench", "messaging", "--quick", "--repeat", "1", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["sizes"]["messages"] == 2_000 and report["body_bytes"] == 256
    for case in ("one_conversation", "many_conversations"):
        r = report[case]
        assert r["messages"] == 2_000
        for key in ("sent_per_s", "received_per_s", "end_to_end_per_s", "receive_p50_ms",
                    "receive_p99_ms", "ratio_floor"):
            assert r[key] > 0, (case, key)
        assert r["receive_p99_ms"] >= r["receive_p50_ms"]
        assert report[f"floor_{case}"]["end_to_end_per_s"] > 0
    assert report["one_conversation"]["messages_per_receive"] == 1_000
    assert report["many_conversations"]["messages_per_receive"] == 20  # one group per call
    single = report["one_per_transaction"]
    assert all(single[k] > 0 for k in ("send_per_s", "receive_per_s", "receive_p50_ms",
                                       "send_cpu_ms", "receive_cpu_ms"))
    assert report["targets"]["end_to_end_per_s"] == 20_000
    drain = report["receive_own_transaction"]  # (c): one group per call, 10 conversations
    assert drain["messages_per_receive"] == 200 and drain["end_to_end_per_s"] > 0
    assert report["floor_receive_own_transaction"]["end_to_end_per_s"] > 0
    idle = report["idle_conversations"]
    assert idle["conversations"] == 5_000 and idle["begin_dialog_us"] > 0
    assert idle["endpoints_cached"] <= idle["endpoint_cache"] == 10_000
    # windows of half the run below 2,000,000 (whole batches): 0-2,000 and 2,000-4,000
    assert idle["window"] == 2_000
    assert [(w["first"], w["last"]) for w in idle["windows"]] == [(0, 2_000), (2_000, 4_000)]
    assert all(w["per_s"] > 0 and w["cpu_us_per_conversation"] > 0 for w in idle["windows"])
    assert idle["last_to_first_rate"] == pytest.approx(
        idle["windows"][-1]["per_s"] / idle["windows"][0]["per_s"])
    assert idle["memory_limit"] == "256.0 MiB"  # a file instance's default
    tags = idle["duckdb_memory_by_tag"]
    assert "IN_MEMORY_TABLE" in tags and all(m["memory_mb"] >= 0 for m in tags.values())
    assert idle["duckdb_memory_mb"] == pytest.approx(
        sum(m["memory_mb"] for m in tags.values()))
    assert idle["peak_rss_growth_mb"] >= idle["rss_growth_mb"] - 1
    assert idle["targets"] == {"rss_bytes_per_conversation_1m": 300.0, "rss_mb_5m": 500.0,
                               "last_to_first_rate": 0.8}
    for case, readers in zip(report["activation"], (1, 4), strict=True):
        assert case["readers"] == readers and case["messages"] == 2_000
        assert case["handled_per_s"] > 0 and 1 <= case["readers_at_most"] <= readers
        assert case["activation_max_ms"] >= case["activation_p50_ms"] > 0
    assert [c["workers"] for c in report["workers"]] == [1, 4, 8]
    assert all(c["handled"] == 16 and c["handled_per_s"] > 0 for c in report["workers"])
    assert [(c["workers"], c["handled"], c["reply"]) for c in report["workers_writing"]
            ] == [(1, 16, True), (4, 16, True), (8, 16, True)]
    assert [(c["workers"], c["handled"]) for c in report["workers_activation"]] == [
        (1, 16), (4, 16)]
    # activation by a T-SQL procedure against a Python callable of the same shape (C8)
    by_tsql = report["tsql_activation"]
    for reader in ("python", "tsql"):  # one reply per RECEIVE: one per conversation
        assert by_tsql[reader]["messages"] == 500 and by_tsql[reader]["replies"] == 100
        assert by_tsql[reader]["handled_per_s"] > 0
        assert by_tsql[reader]["cpu_us_per_message"] > 0
    assert by_tsql["ratio"] == pytest.approx(
        by_tsql["tsql"]["handled_per_s"] / by_tsql["python"]["handled_per_s"])
    assert by_tsql["cpu_ratio"] == pytest.approx(by_tsql["python"]["cpu_us_per_message"]
                                                 / by_tsql["tsql"]["cpu_us_per_message"])
    assert by_tsql["target_ratio"] == 0.5
    assert report["load_average_1m"]["before"] >= 0


def test_bench_idle_conversations_is_an_option_of_bench_messaging_only():
    done = run("bench", "routing", "--idle-conversations", "5")
    assert done.returncode == 2 and "--idle-conversations" in done.stderr
    done = run("bench", "messaging", "--idle-conversations", "-1")
    assert done.returncode == 2 and "--idle-conversations" in done.stderr


def test_bench_messaging_report_reads_as_a_report():
    from pybroker.devtools.bench import messaging

    report = messaging.run(repeat=1, sizes={
        "messages": 60, "conversations": 6, "sends_per_transaction": 25, "max_messages": 1000,
        "receives_per_transaction": 4, "single": 3, "drain_conversations": 3,
        "idle_conversations": 0, "workers_messages": 8, "workers_conversations": 4,
        "workers_processing": 0.002, "bystander_sends": 5, "tsql_activation_messages": 60})
    text = messaging.format_report(report)
    assert "(a) 1 conversation: sent " in text and "(b) 6 conversations: sent " in text
    assert "target >= 20,000/s" in text and "floor/pybroker" in text
    assert "one message per transaction (3 each): send " in text
    assert "(c) RECEIVE in its own transaction: 60 messages over 3 conversations" in text
    assert "idle conversations" not in text  # 0: skipped
    assert "activation, MAX_QUEUE_READERS 1: 60 messages handled " in text
    assert "activation, MAX_QUEUE_READERS 4: 60 messages handled " in text
    assert report["many_conversations"]["messages_per_receive"] == 10
    assert "workers (C7): each RECEIVE of one message, 2 ms of processing, COMMIT; 8 " in text
    assert [(c["workers"], c["handled"]) for c in report["workers"]] == [(1, 8), (4, 8),
                                                                         (8, 8)]
    # the same shape with an activated queue's readers as the workers (C7, C8)
    activated = report["workers_activation"]
    assert [(c["workers"], c["handled"]) for c in activated] == [(1, 8), (4, 8)]
    assert activated[0]["readers_at_most"] == 1 and 1 <= activated[1]["readers_at_most"] <= 4
    assert ("workers as activation's readers (C7, C8): each RECEIVE of one message, 2 ms of "
            "processing, COMMIT; 8 messages over 4 conversations") in text
    assert "    MAX_QUEUE_READERS 4: " in text and "target >= 3.5x: " in text
    # the bystander's dialogs went through while a transaction held its group (C7)
    beside = report["bystander"]
    assert (beside["sends"], beside["held_received"], beside["delivered"]) == (5, 1, 5)
    assert "bystander (C7): 5 transactions of BEGIN DIALOG + SEND to another queue" in text
    by_tsql = report["tsql_activation"]
    assert (by_tsql["tsql"]["replies"], by_tsql["python"]["replies"]) == (6, 6)
    assert ("activation by a T-SQL procedure (C8): WHILE of WAITFOR (RECEIVE TOP (100)), IF "
            "on message_type_name, a reply SEND, COMMIT; 60 messages, MAX_QUEUE_READERS 1: "
            "T-SQL ") in text and "(target >= 50%: " in text


def test_bench_idle_report_reads_as_a_report():
    from pybroker.devtools.bench import idle

    report = idle.run_case(3_000)  # in this process: the figures' shape, not their size
    assert report["window"] == 1_000 and len(report["windows"]) == 3
    text = "\n".join(idle.format_case(report))
    assert "idle conversations: 3,000 begun (1,000 per transaction" in text
    assert "per 1,000 conversations: begin+send " in text
    assert "last/first window: rate " in text and "judged at 5,000,000 only" in text
    assert "IN_MEMORY_TABLE " in text and "memory_limit 256.0 MiB" in text
    # at 5,000,000 the verdicts are given: RSS and the fifth million's rate to the first's
    five = {**report, "conversations": 5_000_000, "rss_growth_mb": 480.0,
            "last_to_first_rate": 0.79}
    text = "\n".join(idle.format_case(five))
    assert "<= 500 MB for 5,000,000: met" in text
    assert "(target >= 0.80x for 5,000,000: MISSED)" in text
