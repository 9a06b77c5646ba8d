"""The pipeline jobs on DuckDB: export schema, resolve (seed examples, expiry at
each conversation's time, reproducible picks), generate, impact, traffic, bad input, and
the CLI. The Spark runs of the same jobs are in test_pipeline_spark.py."""

from __future__ import annotations

import io
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pybroker
from pybroker.apps.pipeline.engine import DuckDBEngine
from pybroker.apps.pipeline.export import export_instance
from pybroker.apps.pipeline.generate import run_generate
from pybroker.apps.pipeline.impact import run_impact
from pybroker.apps.pipeline.progress import Progress
from pybroker.apps.pipeline.schema import CONVERSATIONS, DECISIONS, EXPORTED_TABLES
from pybroker.apps.pipeline.traffic import run_traffic
from pybroker.cli.main import main
from pybroker.devtools.demos.routing import check_case
from pybroker.errors import BrokerError, PipelineError
from tests.pipeline_fixtures import (
    AS_OF,
    NO_ROUTE,
    decision,
    read_rows,
    resolve_to_rows,
    seed_states,
    traffic_instance,
    write_rows,
)

ROOT = Path(__file__).resolve().parents[1]
GUID_1 = "5fb8d92b-ed69-4c80-afbb-2aa6a7d3cb2d"
GUID_2 = "81b1d3d0-288e-4d2c-b1d3-456cbb944b4f"


# -- export ------------------------------------------------------------------------------


def test_export_writes_the_schema_of_every_table(tmp_path):
    file = tmp_path / "i.duckdb"
    with pybroker.connect(file) as inst:
        db = inst.create_database("Sales", broker_instance=GUID_1.upper())
        db.create_route("R", service_name="S", broker_instance=GUID_2.upper(),
                        address="tcp://a:1", lifetime=60)
        db.create_queue("Q")
        db.create_service("Sender", queue="Q")
        db.begin_dialog("Sender", "Nowhere").send(b"waits")  # R2.7: DELAYED, kept (C4)
    notes = export_instance(file, tmp_path / "out")
    assert notes == []
    names = {p.name for p in (tmp_path / "out").iterdir()}
    assert names == {f"{t.name}.parquet" for t in EXPORTED_TABLES} | {"export_info.parquet"}
    for table in EXPORTED_TABLES:
        schema = pq.read_schema(tmp_path / "out" / f"{table.name}.parquet")
        assert schema.names == list(table.column_names)
    routes = pq.read_table(tmp_path / "out" / "routes.parquet").to_pylist()
    r = next(x for x in routes if x["name"] == "R")
    assert r["broker_instance"] == GUID_2  # lower case text
    assert isinstance(r["lifetime"], datetime) and r["lifetime"].tzinfo is None
    dbs = pq.read_table(tmp_path / "out" / "databases.parquet").to_pylist()
    assert {d["name"]: d["service_broker_guid"] for d in dbs}["Sales"] == GUID_1
    (waiting,) = pq.read_table(tmp_path / "out" / "transmission_queue.parquet").to_pylist()
    assert (waiting["to_service_name"], waiting["message_body"]) == ("Nowhere", b"waits")
    assert waiting["transmission_status"].startswith("The target service name could not")
    (endpoint,) = pq.read_table(tmp_path / "out" / "conversation_endpoints.parquet").to_pylist()
    assert (endpoint["state"], endpoint["far_service"]) == ("CO", "Nowhere")


def test_export_of_a_file_with_other_conversation_tables(tmp_path):
    file = tmp_path / "i.duckdb"
    pybroker.connect(file).close()
    con = duckdb.connect(str(file))
    # a file from before migration 002, or one another tool wrote: no endpoints table, and
    # a transmission queue with UUID handles, TIMESTAMPTZ and columns missing
    con.execute("DROP VIEW sys.conversation_endpoints")
    con.execute("DROP TABLE conversation_endpoints")
    con.execute("DROP VIEW sys.transmission_queue")
    con.execute("DROP TABLE transmission_queue")
    con.execute("CREATE TABLE transmission_queue (database_id INTEGER, conversation_handle "
                "UUID, to_service_name VARCHAR, enqueue_time TIMESTAMPTZ, "
                "transmission_status VARCHAR)")
    con.execute("INSERT INTO transmission_queue VALUES (4, "
                "'0F0F0F0F-0000-4000-8000-000000000001', 'S', "
                "TIMESTAMPTZ '2026-01-01 12:00:00+02', '')")
    con.close()
    notes = export_instance(file, tmp_path / "out")
    assert any(n.startswith("conversation_endpoints: not in this file") for n in notes)
    assert "transmission_queue.message_body: not in this file, exported as NULL" in notes
    table = pq.read_table(tmp_path / "out" / "transmission_queue.parquet")
    tq = next(t for t in EXPORTED_TABLES if t.name == "transmission_queue")
    assert table.schema.names == list(tq.column_names)
    row = table.to_pylist()[0]
    assert row["conversation_handle"] == "0f0f0f0f-0000-4000-8000-000000000001"
    assert row["enqueue_time"] == datetime(2026, 1, 1, 10, 0)  # naive UTC
    assert row["message_body"] is None


# -- resolve -----------------------------------------------------------------------------


def test_resolve_the_seed_examples_as_a_batch_as_the_seeds_require(tmp_path):
    states = seed_states(tmp_path)
    assert len(states) == 9  # seven examples, two with a forwarding override
    routes_seen = Counter()
    for state in states:
        with DuckDBEngine() as engine:
            rows = resolve_to_rows(engine, state.conversations, state.file,
                                   tmp_path / f"{state.name}_out")
        assert len(rows) == len(state.expect)
        for row in rows:
            d = decision(row)
            case = state.expect[d.conversation_id]
            assert check_case(case, d) == [], (state.name, case)
            assert d.outcome == case.expect["outcome"]
            routes_seen[(state.name, case.service, d.route)] += 1
    # R2.3 / example 5: over many conversations the pick uses both identifiers
    balanced = {route for (name, service, route) in routes_seen
                if name.startswith("ex5") and service == "BalancedService"}
    assert balanced == {"BalancedRouteOne", "BalancedRouteTwo"}


def test_an_engine_keeps_each_step_of_a_resolve_and_its_seconds(tmp_path):
    # `pybroker bench pipeline` prints these as where the time goes
    [state] = seed_states(tmp_path, {"ex5_fwd0"})
    out = tmp_path / "out"
    with DuckDBEngine() as engine:
        rows = resolve_to_rows(engine, state.conversations, state.file, out)
        steps = list(engine.steps)
    assert len(rows) == len(state.expect)
    assert [what for what, _ in steps] == [
        "conversations_id_counts", "resolve_epochs", "resolve_keys", "resolve_shared_keys",
        "resolve_key_options",
        "resolve_option_values (distinct values)", "resolve_option_values",
        "writing"]  # the step's name; its progress line names the path
    assert all(seconds > 0 for _, seconds in steps)


def _expiry_instance(tmp_path) -> Path:
    now = datetime(2026, 1, 1)
    file = tmp_path / "expiry.duckdb"
    with pybroker.connect(file, clock=lambda: (now - datetime(1970, 1, 1)).total_seconds()) \
            as inst:
        db = inst.create_database("Sales")
        db.create_route("Soon", service_name="S", address="tcp://soon:1", lifetime=3600)
        db.create_route("Later", service_name="S", address="tcp://later:1", lifetime=7200)
    return file


def test_resolve_judges_expiry_at_each_conversations_begin_time(tmp_path):
    file = _expiry_instance(tmp_path)
    start = datetime(2026, 1, 1)
    at = {"a": start + timedelta(minutes=30), "b": start + timedelta(hours=1),
          "c": start + timedelta(hours=1, minutes=59), "d": start + timedelta(hours=2),
          "e": start + timedelta(days=3)}
    rows = [{"conversation_id": f"{k}{i}", "origin": "Sales", "service_name": "S",
             "broker_instance": None, "begin_time": t} for k, t in at.items()
            for i in range(30)]
    rows.append({"conversation_id": "unknown-origin", "origin": "Nowhere",
                 "service_name": "S", "broker_instance": None, "begin_time": start})
    conv = write_rows(tmp_path / "c.parquet", CONVERSATIONS, rows)
    with DuckDBEngine() as engine:
        out = [decision(r) for r in resolve_to_rows(engine, conv, file, tmp_path / "o")]
    routes: dict[str, set] = {}
    for d in out:
        routes.setdefault(d.conversation_id[0], set()).add((d.route, d.outcome))
    assert routes["a"] == {("Soon", "send"), ("Later", "send")}  # both live: R3 pick
    assert routes["b"] == {("Later", "send")}  # lifetime > routed_at is false at expiry
    assert routes["c"] == {("Later", "send")}
    assert routes["d"] == {("AutoCreatedLocal", "delay")} or routes["d"] == {(None, "delay")}
    assert routes["e"] == routes["d"]
    unknown = next(d for d in out if d.conversation_id == "unknown-origin")
    assert unknown.outcome is None and unknown.decided_by is None
    assert len(out) == 151


def test_resolve_picks_depend_on_the_conversation_id_only(tmp_path):
    file = tmp_path / "i.duckdb"
    with pybroker.connect(file) as inst:
        db = inst.create_database("A")
        db.create_route("B1", service_name="T", broker_instance=GUID_1, address="tcp://c:1")
        db.create_route("B2", service_name="T", broker_instance=GUID_2, address="tcp://d:1")
        db.create_route("B3", service_name="T", broker_instance=GUID_2, address="tcp://e:1")
    rows = [{"conversation_id": f"id-{i}", "origin": "A", "service_name": "T",
             "broker_instance": None, "begin_time": datetime(2030, 1, 1)}
            for i in range(6000)]
    forward = write_rows(tmp_path / "f.parquet", CONVERSATIONS, rows)
    backward = write_rows(tmp_path / "b.parquet", CONVERSATIONS, rows[::-1])
    with DuckDBEngine() as engine:
        one = resolve_to_rows(engine, forward, file, tmp_path / "o1")
    with DuckDBEngine() as engine:
        two = resolve_to_rows(engine, backward, file, tmp_path / "o2")
    assert one == two
    counts = Counter(decision(r).address for r in one)
    # R2.3 first picks an identifier (1/2 each), then R3 one of its routes (1/4 each)
    assert 2700 < counts["tcp://c:1"] < 3300
    assert 1200 < counts["tcp://d:1"] < 1800 and 1200 < counts["tcp://e:1"] < 1800
    assert sum(counts.values()) == 6000


@pytest.mark.parametrize("bits", [1, 4])
def test_keys_whose_texts_share_a_hash_are_found_by_their_texts(tmp_path, monkeypatch, bits):
    # The key join compares each conversation's key hash (decision_keys.sql) unless two
    # texts of the conversations share one; with the hash cut to a few bits they do, and
    # the join must compare the texts instead: the same decisions either way, and every
    # seed example (unknown origins, no begin_time, broker identifiers in any case) as its
    # expected rows.
    from pybroker.apps.pipeline import resolve as resolve_module

    work = tmp_path / "work"
    with DuckDBEngine() as engine:
        run_generate(engine, work, conversations=5_000, routes=200, seed="3")
    # and conversations whose texts hold NULLs (no key matches a NULL, by either join)
    rows = [dict(zip(CONVERSATIONS.column_names, r, strict=True))
            for r in read_rows(work / "conversations.parquet")]
    for i, row in enumerate(rows[:40]):
        rows.append({**row, "conversation_id": f"null-{i}",
                     ["origin", "service_name", "broker_instance"][i % 3]: None})
    conversations = write_rows(tmp_path / "conversations.parquet", CONVERSATIONS, rows)

    def run(out: Path) -> tuple[list, int]:
        with DuckDBEngine() as engine:
            rows = resolve_to_rows(engine, conversations, work, out)
            _, [(shared,)] = engine.fetch("resolve_shared_keys")
        return rows, shared

    by_hash, shared = run(tmp_path / "by_hash")
    assert shared == 0 and len(by_hash) == 5_040
    monkeypatch.setattr(resolve_module, "KEY_HASH_BITS", bits)
    by_text, shared = run(tmp_path / "by_text")
    assert shared > 0  # every key's row says so: the texts were compared
    assert by_text == by_hash
    (tmp_path / "seeds").mkdir()
    for state in seed_states(tmp_path / "seeds"):
        with DuckDBEngine() as engine:
            rows = resolve_to_rows(engine, state.conversations, state.file,
                                   tmp_path / "seeds" / f"{state.name}.out")
        assert len(rows) == len(state.expect)
        for row in rows:
            d = decision(row)
            assert check_case(state.expect[d.conversation_id], d) == [], state.name


# -- generate ------------------------------------------------------------------------------


def test_generate_is_seeded_and_covers_the_routing_steps(tmp_path):
    with DuckDBEngine() as engine:
        run_generate(engine, tmp_path / "a", conversations=20_000, routes=500, seed="7")
    with DuckDBEngine() as engine:
        run_generate(engine, tmp_path / "b", conversations=20_000, routes=500, seed="7")
    with DuckDBEngine() as engine:
        run_generate(engine, tmp_path / "c", conversations=20_000, routes=500, seed="8")
    a = read_rows(tmp_path / "a" / "conversations.parquet")
    assert a == read_rows(tmp_path / "b" / "conversations.parquet")
    assert a != read_rows(tmp_path / "c" / "conversations.parquet")
    assert len({r[0] for r in a}) == 20_000
    routes = read_rows(tmp_path / "a" / "routes.parquet")
    assert len(routes) == 504  # and AutoCreatedLocal in msdb and three user databases
    assert sum(r[3] is None and r[4] is None and r[2] != "AutoCreatedLocal"
               for r in routes) >= 1  # wildcards
    assert len({r[5] for r in routes if r[5] is not None}) == 4  # four expiry instants
    with DuckDBEngine() as engine:
        out = [decision(r) for r in resolve_to_rows(
            engine, tmp_path / "a" / "conversations.parquet", tmp_path / "a",
            tmp_path / "decisions")]
    assert len(out) == 20_000
    steps = {(d.match_step, d.decided_by) for d in out}
    for match in ("R2.1", "R2.2", "R2.3", "R2.5"):
        assert any(m == match for m, _ in steps), match
    for decided in ("R3.1", "R3.2", "R3.3", "R3.5"):
        assert any(d == decided for _, d in steps), decided
    popular = Counter(r[2] for r in a).most_common(1)[0][1]
    assert popular > 20_000 / 500 * 3  # skewed service popularity


def test_one_engine_runs_job_after_job(tmp_path):
    """An engine is not spent by a job: each stage makes its tables (and resolve its ENUM
    types) anew, so jobs on other inputs, and the same job again, write what a fresh
    engine writes."""
    sizes = {"a": {"conversations": 3_000, "routes": 60, "seed": "3"},
             "b": {"conversations": 1_000, "routes": 12, "seed": "4"}}
    with DuckDBEngine() as engine:
        for w, size in sizes.items():
            run_generate(engine, tmp_path / w, **size)
        runs = [resolve_to_rows(engine, tmp_path / w / "conversations.parquet",
                                tmp_path / w, tmp_path / f"again_{i}")
                for i, w in enumerate("aba")]
        state = tmp_path / "traffic"
        traffic_instance(state)
        traffic = [run_traffic(engine, state, tmp_path / f"t{i}", as_of=AS_OF)
                   for i in range(2)]
    fresh = {}
    for w, size in sizes.items():
        with DuckDBEngine() as engine:
            run_generate(engine, tmp_path / f"fresh_{w}", **size)
        assert read_rows(tmp_path / f"fresh_{w}" / "conversations.parquet") == read_rows(
            tmp_path / w / "conversations.parquet")
        with DuckDBEngine() as engine:
            fresh[w] = resolve_to_rows(engine, tmp_path / w / "conversations.parquet",
                                       tmp_path / w, tmp_path / f"fresh_out_{w}")
    assert len(fresh["a"]) == 3_000 and len(fresh["b"]) == 1_000
    assert [sorted(r) for r in runs] == [sorted(fresh[w]) for w in "aba"]
    first, second = ({k: v for k, v in t.items() if k != "output"} for t in traffic)
    assert first == second
    for report in ("volume", "delayed", "stuck"):
        assert read_rows(tmp_path / "t0" / report) == read_rows(tmp_path / "t1" / report)
    assert traffic[0]["rows"] == {"volume": 4, "delayed": 2, "stuck": 2, "endpoints": 2}


# -- impact --------------------------------------------------------------------------------


def test_impact_of_a_route_script(tmp_path):
    file = _expiry_instance(tmp_path)
    with pybroker.connect(file) as inst:
        db = inst.database("Sales")
        db.create_route("Keep", service_name="K", address="tcp://keep:1")
        db.create_route("Other", service_name="M", address="tcp://m1:1")
    rows = [{"conversation_id": f"{s}{i}", "origin": "Sales", "service_name": s,
             "broker_instance": None, "begin_time": datetime(2026, 1, 1, 0, 10)}
            for s in ("S", "K", "M") for i in range(50)]
    rows += [{"conversation_id": f"out{i}", "origin": "outside", "service_name": "K",
              "broker_instance": None, "begin_time": datetime(2026, 1, 1)} for i in range(5)]
    conv = write_rows(tmp_path / "c.parquet", CONVERSATIONS, rows)
    script = ("DROP ROUTE Keep; ALTER ROUTE Other WITH ADDRESS = 'tcp://m2:1';")
    with DuckDBEngine() as engine:
        summary = run_impact(engine, conv, file, tmp_path / "impact", script=script,
                             database="Sales")
    by = {(r["service_name"], r["before_route"], r["after_route"]): r for r in summary}
    assert by[("K", "Keep", None)]["conversations"] == 50
    assert by[("K", "Keep", None)]["change"] == "becomes DELAYED"
    assert by[("M", "Other", "Other")]["conversations"] == 50
    assert by[("M", "Other", "Other")]["change"] == "moves"
    assert sum(r["conversations"] for r in summary) == 100  # S and outside unchanged
    changes = read_rows(tmp_path / "impact" / "changes")
    assert len(changes) == 100
    assert file.exists()
    with pybroker.connect(file) as inst:  # the script ran on a copy only
        assert {r.name for r in inst.database("Sales").routes()} >= {"Keep", "Other"}


def test_impact_script_errors_are_reported(tmp_path):
    file = _expiry_instance(tmp_path)
    conv = write_rows(tmp_path / "c.parquet", CONVERSATIONS, [])
    with DuckDBEngine() as engine, pytest.raises(PipelineError, match="NoSuchRoute"):
        run_impact(engine, conv, file, tmp_path / "x", script="DROP ROUTE NoSuchRoute",
                   database="Sales")


# -- traffic -------------------------------------------------------------------------------


def test_traffic_reports(tmp_path):
    state = tmp_path / "state"
    traffic_instance(state)
    with DuckDBEngine() as engine:
        result = run_traffic(engine, state, tmp_path / "t", as_of=AS_OF)
    assert result["rows"] == {"volume": 4, "delayed": 2, "stuck": 2, "endpoints": 2}
    delayed = read_rows(tmp_path / "t" / "delayed")
    # conversation_handle, database, service, outcome, decided_by, messages, first, waited
    assert [(r[2], r[3], r[7], r[8]) for r in delayed] == [
        ("NowhereService", "delay", 7200, NO_ROUTE),
        ("NowhereService", "delay", 1800, NO_ROUTE),
    ]
    stuck = {(r[1], r[2], r[3][:18]): (r[4], r[5], r[7]) for r in
             read_rows(tmp_path / "t" / "stuck")}
    assert stuck == {
        ("RemoteService", "RemoteRoute", "Connection attempt"): (2, 1, 3600),
        ("NowhereService", None, NO_ROUTE[:18]): (2, 2, 7200),
    }
    volume = read_rows(tmp_path / "t" / "volume")
    remote = [r for r in volume if r[1] == "RemoteService"]
    assert sum(r[5] for r in remote) == 6 and sum(r[7] for r in remote) == 60
    assert {r[2] for r in remote} == {"RemoteRoute"}


def test_traffic_over_a_real_instance_with_waiting_messages(tmp_path, clock):
    """End to end: conversations of a real instance wait in its transmission
    queue; export; traffic reports them with their transmission_status (C4)."""
    file = tmp_path / "live.duckdb"
    with pybroker.connect(file, clock=clock, worker=False) as inst:
        sales = inst.create_database("Sales")
        sales.create_queue("Q")
        sales.create_service("SalesService", queue="Q")
        sales.create_route("RemoteRoute", service_name="RemoteService",
                           address="tcp://remote.example.com:4022")
        for _ in range(2):
            sales.begin_dialog("SalesService", "RemoteService").send(b"0123456789")
        clock.now += 600
        sales.begin_dialog("SalesService", "NowhereService").send(b"x")  # R2.7
        clock.now += 900
    export_instance(file, tmp_path / "state")
    with DuckDBEngine() as engine:
        result = run_traffic(engine, tmp_path / "state", tmp_path / "t",
                             as_of=datetime.fromtimestamp(clock.now, UTC).replace(tzinfo=None))
    assert result["rows"]["delayed"] == 1 and result["rows"]["endpoints"] == 2
    (delayed,) = read_rows(tmp_path / "t" / "delayed")
    assert (delayed[2], delayed[3], delayed[7]) == ("NowhereService", "delay", 900)
    stuck = {(r[1], r[2]): (r[4], r[5]) for r in read_rows(tmp_path / "t" / "stuck")}
    assert stuck[("RemoteService", "RemoteRoute")] == (2, 2)  # 2 messages, 2 conversations
    assert stuck[("NowhereService", None)] == (1, 1)


def test_traffic_needs_a_transmission_queue(tmp_path):
    file = tmp_path / "i.duckdb"
    pybroker.connect(file).close()
    con = duckdb.connect(str(file))  # as a file from before migration 002
    con.execute("DROP VIEW sys.transmission_queue")
    con.execute("DROP TABLE transmission_queue")
    con.close()
    with DuckDBEngine() as engine, pytest.raises(PipelineError, match="no transmission queue"):
        run_traffic(engine, file, tmp_path / "t")


# -- bad input -----------------------------------------------------------------------------


def _state(tmp_path) -> Path:
    file = tmp_path / "i.duckdb"
    with pybroker.connect(file) as inst:
        inst.create_database("Sales")
    return file


def test_bad_conversation_files(tmp_path):
    file = _state(tmp_path)
    good = {"conversation_id": "x", "origin": "Sales", "service_name": "S",
            "broker_instance": None, "begin_time": datetime(2030, 1, 1)}
    (tmp_path / "garbage.parquet").write_bytes(b"not parquet at all")

    def write(name: str, changes: dict, drop: str | None = None) -> None:
        fields = {"conversation_id": pa.string(), "origin": pa.string(),
                  "service_name": pa.string(), "broker_instance": pa.string(),
                  "begin_time": pa.timestamp("us")}
        row = dict(good)
        for column, (type_, value) in changes.items():
            fields[column], row[column] = type_, value
        if drop:
            del fields[drop], row[drop]
        pq.write_table(pa.Table.from_pylist([row], schema=pa.schema(list(fields.items()))),
                       tmp_path / name)

    write("text_time.parquet", {"begin_time": (pa.string(), "2030-01-01")})
    write("no_origin.parquet", {}, drop="origin")
    write("int_id.parquet", {"conversation_id": (pa.int64(), 7)})
    write("tz_time.parquet", {"begin_time": (pa.timestamp("us", tz="UTC"),
                                             datetime(2030, 1, 1))})
    cases = {
        "missing.parquet": "no such file or directory",
        "garbage.parquet": "is not readable Parquet",
        "text_time.parquet": "column begin_time is VARCHAR, expected TIMESTAMP",
        "no_origin.parquet": "column origin is missing",
        "int_id.parquet": "column conversation_id is BIGINT, expected VARCHAR",
        "tz_time.parquet": "column begin_time is TIMESTAMP WITH TIME ZONE",
    }
    for name, message in cases.items():
        with DuckDBEngine() as engine, pytest.raises(PipelineError, match=message):
            from pybroker.apps.pipeline.resolve import run_resolve

            run_resolve(engine, tmp_path / name, file, tmp_path / "out")


def test_bad_routing_state_and_output(tmp_path):
    from pybroker.apps.pipeline.resolve import run_resolve

    file = _state(tmp_path)
    conv = write_rows(tmp_path / "c.parquet", CONVERSATIONS, [])
    (tmp_path / "notduck.duckdb").write_text("hello")
    (tmp_path / "emptydir").mkdir()
    with DuckDBEngine() as engine:
        with pytest.raises(PipelineError, match="cannot open instance file"):
            run_resolve(engine, conv, tmp_path / "notduck.duckdb", tmp_path / "o")
        with pytest.raises(PipelineError, match=r"has no instance_settings\.parquet"):
            run_resolve(engine, conv, tmp_path / "emptydir", tmp_path / "o")
        (tmp_path / "precious").mkdir()
        (tmp_path / "precious" / "notes.txt").write_text("keep me")
        with pytest.raises(PipelineError, match="no previous pipeline output"):
            run_resolve(engine, conv, file, tmp_path / "precious")
    assert (tmp_path / "precious" / "notes.txt").read_text() == "keep me"
    assert issubclass(PipelineError, BrokerError)


# -- CLI -----------------------------------------------------------------------------------


def test_cli_generate_resolve_export_traffic(tmp_path, capsys):
    work = tmp_path / "w"
    assert main(["pipeline", "generate", str(work), "--conversations", "3000", "--routes",
                 "100", "--seed", "3"]) == 0
    assert main(["pipeline", "resolve", str(work), str(work / "conversations.parquet"),
                 str(tmp_path / "d"), "--json"]) == 0
    out = capsys.readouterr().out
    import json

    result = json.loads(out[out.index("{"):])
    assert result["conversations"] == 3000 and sum(result["outcomes"].values()) == 3000
    file = _state(tmp_path)
    assert main(["export", str(file), str(tmp_path / "e")]) == 0
    out = capsys.readouterr().out
    assert "note:" not in out  # every exported table is in the file
    assert (tmp_path / "e" / "transmission_queue.parquet").exists()


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pybroker", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)


def test_cli_errors_are_one_line_and_progress_stays_quiet_off_a_terminal(tmp_path):
    file = _state(tmp_path)
    conv = write_rows(tmp_path / "c.parquet", CONVERSATIONS, [
        {"conversation_id": "a", "origin": "Sales", "service_name": "S",
         "broker_instance": None, "begin_time": datetime(2030, 1, 1)}])
    ok = _cli("pipeline", "resolve", str(file), str(conv), str(tmp_path / "o"))
    assert ok.returncode == 0 and ok.stderr == ""  # no progress: stderr is a pipe
    assert "resolved 1 conversations" in ok.stdout
    missing = _cli("pipeline", "resolve", str(file), str(tmp_path / "nope.parquet"),
                   str(tmp_path / "o"))
    assert missing.returncode == 1
    assert missing.stderr.strip().count("\n") == 0
    assert "no such file or directory" in missing.stderr
    usage = _cli("pipeline", "resolve", str(file), str(conv), str(tmp_path / "o"),
                 "--master", "local[2]")
    assert usage.returncode == 2 and "--engine spark only" in usage.stderr
    assert _cli("pipeline", "--help").returncode == 0


def test_unreachable_spark_master_fails_fast_with_one_line(tmp_path):
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    file = _state(tmp_path)
    conv = write_rows(tmp_path / "c.parquet", CONVERSATIONS, [])
    result = _cli("pipeline", "resolve", str(file), str(conv), str(tmp_path / "o"),
                  "--engine", "spark", "--master", f"spark://127.0.0.1:{port}")
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"pybroker: error: cannot reach Spark master spark://127.0.0.1:{port} within 5 s "
        "(is the master running, and is the host:port right?)"
    )


def test_progress_writes_only_when_enabled():
    stream = io.StringIO()
    Progress(enabled=True, stream=stream).done("[duckdb] stage: done")
    assert stream.getvalue() == "\r[duckdb] stage: done\n"
    quiet = io.StringIO()
    progress = Progress(stream=quiet)  # a StringIO is no TTY
    progress.show("x")
    progress.done("y")
    assert quiet.getvalue() == "" and progress.enabled is False


def test_bench_pipeline_report_format():
    from pybroker.devtools.bench.pipeline import format_report

    engine = {"seconds": 2.0, "conversations_per_s": 500_000.0, "peak_rss_mb": 300.0,
              "jvm_peak_rss_mb": 0.0, "startup_seconds": 0.0, "runs": [2.0],
              "steps": {"resolve_keys": 0.5, "writing": 1.25}}
    report = {
        "machine": {"cpus": 2, "platform": "p", "python": "3", "duckdb": "1.5.6",
                    "pyspark": "4", "java": "17"},
        "sizes": {"conversations": 1_000_000, "routes": 10}, "repeat": 1,
        "generate_seconds": 1.0, "distinct_keys": 5, "spark_master": "local[2]",
        "duckdb_memory_limit": "2GB", "duckdb": engine,
        "spark": {**engine, "seconds": 8.0, "conversations_per_s": 125_000.0,
                  "jvm_peak_rss_mb": 2000.0, "startup_seconds": 9.0, "runs": [8.0]},
        "floor": {**engine, "seconds": 1.0, "conversations_per_s": 1_000_000.0},
        "spark_floor": {**engine, "seconds": 3.0, "runs": [3.0, 3.5]},
        "ratio_spark_to_duckdb": 4.0, "ratio_duckdb_to_floor": 2.0,
        "ratio_spark_to_spark_floor": 8.0 / 3.0, "ratio_spark_floor_to_duckdb": 1.5,
        "checksums": {"duckdb": (1_000_000, 0xABC), "spark": (1_000_000, 0xABC)},
        "identical": True,
    }
    text = format_report(report)
    assert "duckdb:        2.00 s = 500,000 conversations/s, peak RSS 300 MB with " \
        "memory_limit 2GB" in text
    assert "JVM 2,000 MB" in text and "spark/duckdb:  4.00x" in text
    assert "floor:         1.00 s = 1,000,000 rows/s" in text
    assert "resolve takes 2.00x the floor" in text
    assert "spark floor:   3.00 s (runs 3.00, 3.50): Spark's resolve takes 2.67x its " \
        "floor; the floor alone is 1.50x DuckDB's resolve" in text
    assert "1,000,000 rows, checksum 0000000000000abc on DuckDB; Spark's identical" in text
    assert "DuckDB >= 1,000,000/s NOT met" in text and "Spark <= 3x DuckDB NOT met" in text
    assert "this is a smaller workload" in text
    assert "  where duckdb's time goes (median s): resolve_keys 0.50, writing 1.25, the rest " \
        "(reading, planning) 0.25" in text
    report["spark"]["steps"] = {}  # a run that kept none prints no line
    assert "where spark's" not in format_report(report)
    report["identical"] = False
    report["checksums"]["spark"] = (999_999, 0xDEF)
    assert "Spark's DIFFERENT: 999,999 rows" in format_report(report)


def test_bench_pipeline_steps_are_medians_over_the_runs_a_repeated_step_summed():
    from pybroker.devtools.bench.pipeline import _median_steps

    runs = [{"steps": [["keys", 1.0], ["writing", 4.0]]},
            {"steps": [["keys", 3.0], ["writing", 2.0], ["writing", 1.0]]},
            {"steps": [["keys", 2.0]]}]
    assert _median_steps(runs) == {"keys": 2.0, "writing": 3.0}
    assert list(_median_steps(runs)) == ["keys", "writing"]
    assert _median_steps([{"seconds": 1.0}]) == {}


def test_bench_pipeline_checksum_ignores_row_order(tmp_path):
    from pybroker.devtools.bench.pipeline import decisions_checksum

    rows = [{c: f"{c}-{i}" for c in DECISIONS.column_names} for i in range(5)]
    rows[0]["route"] = None
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    write_rows(tmp_path / "a" / "part-0.parquet", DECISIONS, rows[:2])
    write_rows(tmp_path / "a" / "part-1.parquet", DECISIONS, rows[2:])
    write_rows(tmp_path / "b" / "part-0.parquet", DECISIONS, rows[::-1])
    assert decisions_checksum(tmp_path / "a") == decisions_checksum(tmp_path / "b")
    assert decisions_checksum(tmp_path / "a")[0] == 5
    rows[3]["decided_by"] = "R3.5"
    write_rows(tmp_path / "b" / "part-0.parquet", DECISIONS, rows)
    assert decisions_checksum(tmp_path / "a") != decisions_checksum(tmp_path / "b")


def test_duckdb_never_prints_its_own_progress_bar():
    # DuckDB's bar goes to stdout even off a terminal (it broke --json output of a long
    # run); the engine keeps the tracking for its own progress line and drops the printing
    with DuckDBEngine() as engine:
        printing, tracking = engine.con.execute(
            "SELECT current_setting('enable_progress_bar_print'), "
            "current_setting('enable_progress_bar')").fetchone()
    assert (printing, tracking) == (False, True)


def test_cli_impact_between_two_exports_and_traffic(tmp_path, capsys):
    before = tmp_path / "before.duckdb"
    with pybroker.connect(before) as inst:
        db = inst.create_database("Sales")
        db.create_route("R", service_name="S", address="tcp://old:1")
    export_instance(before, tmp_path / "before")
    with pybroker.connect(before) as inst:
        inst.database("Sales").alter_route("R", address="tcp://new:1")
    export_instance(before, tmp_path / "after")
    conv = write_rows(tmp_path / "c.parquet", CONVERSATIONS, [
        {"conversation_id": f"c{i}", "origin": "Sales", "service_name": s,
         "broker_instance": None, "begin_time": datetime(2030, 1, 1)}
        for i, s in enumerate(["S", "S", "S", "T"])])
    assert main(["pipeline", "impact", str(tmp_path / "before"), str(conv),
                 str(tmp_path / "impact"), "--after", str(tmp_path / "after")]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "3 conversations change their decision -> " \
        f"{tmp_path / 'impact'}/changes"
    assert "        3  S: send via R -> send via R (moves)" in out
    changes = read_rows(tmp_path / "impact" / "changes")
    assert {(r[7], r[12]) for r in changes} == {("tcp://old:1", "tcp://new:1")}
    assert main(["pipeline", "impact", str(tmp_path / "before"), str(conv),
                 str(tmp_path / "i2"), "--script", "DROP ROUTE R"]) == 2  # no --database

    state = tmp_path / "state"
    traffic_instance(state)
    assert main(["pipeline", "traffic", str(state), str(tmp_path / "t"),
                 "--as-of", "2026-03-01T12:00:00Z"]) == 0
    out = capsys.readouterr().out
    assert "volume (4 rows), delayed (2 rows), stuck (2 rows), endpoints (2 rows)" in out


def test_duckdb_writes_parquet_version_2_that_other_readers_read_back(tmp_path):
    # DuckDBEngine.write (duckdb__write_parquet.sql): version 2 encodings, the same rows
    # through DuckDB and pyarrow (Spark reads them in test_pipeline_spark.py)
    t0 = datetime(2030, 1, 1)
    rows = [(f"{i:08d}-0000-4000-8000-000000000000", "Shop", f"svc{i % 7}",
             None if i % 3 else f"ABC{i}", t0 + timedelta(microseconds=37 * i))
            for i in range(3000)]
    with DuckDBEngine() as duck:
        duck.register_rows("conversations", CONVERSATIONS, rows)
        duck.write("conversations", tmp_path / "out")
    [part] = sorted((tmp_path / "out").glob("*.parquet"))
    con = duckdb.connect()
    encodings = {e for (e,) in con.execute(
        "SELECT encodings FROM parquet_metadata($p)", {"p": str(part)}).fetchall()}
    assert any("DELTA" in e for e in encodings), encodings
    assert con.execute("SELECT * FROM read_parquet($p) ORDER BY 1",
                       {"p": str(part)}).fetchall() == rows
    table = pq.read_table(part)
    assert table.column("conversation_id").to_pylist() == [r[0] for r in rows]
    assert table.column("begin_time").to_pylist() == [r[4] for r in rows]


def test_duckdb_runs_under_a_memory_limit_and_spills_to_its_own_directory(tmp_path):
    # DuckDB's default limit is 80 % of RAM (a 10M-conversation resolve peaked at 16 GB)
    with DuckDBEngine() as engine:
        limit, temp = engine.con.execute(
            "SELECT current_setting('memory_limit'), current_setting('temp_directory')"
        ).fetchone()
        spill = engine.temp_directory
        assert spill.is_dir() and temp == str(spill)
    assert limit.replace(" ", "").upper() in ("1.8GIB", "1.9GIB", "2.0GIB", "2GB", "1.8GB")
    assert not spill.exists()  # removed at close
    with DuckDBEngine(memory_limit="500MB", temp_directory=tmp_path) as engine:
        assert engine.con.execute("SELECT current_setting('memory_limit')").fetchone()[0]
    assert tmp_path.is_dir()  # a directory given by the caller is the caller's
    with pytest.raises(PipelineError, match="must be a size with its unit"):
        DuckDBEngine(memory_limit="lots")


def test_cli_memory_limit_is_for_duckdb_only(tmp_path):
    file = _state(tmp_path)
    conv = write_rows(tmp_path / "c.parquet", CONVERSATIONS, [])
    ok = _cli("pipeline", "resolve", str(file), str(conv), str(tmp_path / "o"),
              "--memory-limit", "300MB")
    assert ok.returncode == 0, ok.stderr
    bad = _cli("pipeline", "resolve", str(file), str(conv), str(tmp_path / "o"),
               "--memory-limit", "many")
    assert bad.returncode == 1 and "must be a size with its unit" in bad.stderr
    spark = _cli("pipeline", "resolve", str(file), str(conv), str(tmp_path / "o"),
                 "--engine", "spark", "--memory-limit", "1GB")
    assert spark.returncode == 2 and "--engine duckdb only" in spark.stderr
