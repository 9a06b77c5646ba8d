"""Parity of the pipeline on Spark and DuckDB: the seven seed
examples as a batch, the generate workload (30,000 conversations), impact and traffic give
identical rows on both engines, and duplicate conversation ids are named as on DuckDB (a
standalone cluster's job: test_pipeline_spark_cluster.py)."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pybroker.apps.pipeline import engine as engine_module
from pybroker.apps.pipeline.engine import LOCAL_DRIVER_JAVA_OPTIONS, DuckDBEngine, SparkEngine
from pybroker.apps.pipeline.generate import TEMPLATES, run_generate
from pybroker.apps.pipeline.impact import run_impact
from pybroker.apps.pipeline.traffic import run_traffic
from pybroker.devtools.demos.routing import check_case
from tests.pipeline_fixtures import (
    AS_OF,
    DUPLICATED_IDS,
    decision,
    expected_refusal,
    read_rows,
    refusal,
    resolve_to_rows,
    seed_state_names,
    seed_states,
    traffic_instance,
    write_rows,
)

pytestmark = pytest.mark.spark
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def spark_engine(spark):
    engine = SparkEngine(spark)
    yield engine
    engine.close()  # drops the temp views; the session stays for the next test


def test_a_local_driver_jvm_waits_out_the_gclocker_instead_of_failing_a_broadcast(spark):
    # A broadcast once failed with "Not enough memory" after JDK 17's GCLocker gave up on a
    # 4 MB allocation twice; the local driver's JVM runs with the longer retry.
    jvm = spark.sparkContext._jvm
    arguments = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
                     .getInputArguments())
    for option in LOCAL_DRIVER_JAVA_OPTIONS.split():
        assert option in arguments
    assert "-Xmx2g" in arguments


def _broadcast_lookups(engine: SparkEngine) -> int:
    """How many joins of the staged decisions copy the keys or options to each task."""
    plan = engine.spark.table("resolve_decisions")._jdf.queryExecution().executedPlan()
    return sum(1 for line in plan.toString().splitlines()
               if "BroadcastHashJoin" in line and "LeftOuter" in line)


# one test per routing state, so that a parallel run (pytest -n) spreads them
@pytest.mark.parametrize("name", seed_state_names())
def test_seed_examples_as_a_batch_give_identical_rows(spark_engine, tmp_path, name):
    [state] = seed_states(tmp_path, {name})
    with DuckDBEngine() as duck:
        expected = resolve_to_rows(duck, state.conversations, state.file, tmp_path / "duck")
    on_spark = resolve_to_rows(spark_engine, state.conversations, state.file,
                               tmp_path / "spark")
    assert on_spark == expected
    # the four joins of the conversations with keys and options copy those to each task
    # instead of shuffling the conversations (Engine.broadcastable: few keys here)
    assert _broadcast_lookups(spark_engine) == 4
    assert len(on_spark) == len(state.expect)
    for row in on_spark:
        d = decision(row)
        assert check_case(state.expect[d.conversation_id], d) == []


def test_keys_and_options_are_broadcast_unless_too_many_or_broadcasts_are_off(
        spark_engine, monkeypatch):
    # Engine.broadcastable decides whether decide_conversations.sql's joins carry the hint
    spark = spark_engine.spark
    spark.range(5).createOrReplaceTempView("few_keys")
    spark.range(3).createOrReplaceTempView("few_options")
    assert spark_engine.broadcastable("few_keys", "few_options")
    with monkeypatch.context() as m:
        m.setattr(engine_module, "BROADCAST_MAX_ROWS", 4)
        assert not spark_engine.broadcastable("few_keys", "few_options")
        assert spark_engine.broadcastable("few_options")
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
    try:
        assert not spark_engine.broadcastable("few_options")
    finally:
        spark.conf.unset("spark.sql.autoBroadcastJoinThreshold")
    with DuckDBEngine() as duck:
        assert not duck.broadcastable("anything")


def test_duplicate_conversation_ids_are_named_as_on_duckdb(spark_engine):
    """Counts first, the exact query only when they differ (test_pipeline_unique_ids.py)."""
    for ids in (DUPLICATED_IDS, [f"{n:08d}" for n in range(2000)]):
        assert refusal(spark_engine, ids) == expected_refusal(ids)


def test_the_bench_floor_writes_every_conversation_on_both_engines(spark_engine, tmp_path):
    # `pybroker bench pipeline`'s floor: each conversation read and one row of the
    # decisions' eleven columns written, nothing decided; the same rows on both engines
    from pybroker.devtools.bench.pipeline import DECISION_COLUMNS, run_floor

    work = tmp_path / "work"
    with DuckDBEngine() as duck:
        run_generate(duck, work, conversations=3_000, routes=40, seed="7")
        run_floor(duck, work, tmp_path / "duck")
    run_floor(spark_engine, work, tmp_path / "spark")
    rows = read_rows(tmp_path / "duck")
    assert len(rows) == 3_000 and len({r[0] for r in rows}) == 3_000
    assert read_rows(tmp_path / "spark") == rows
    files = sorted((tmp_path / "spark").glob("*.parquet"))
    assert tuple(pq.read_schema(files[0]).names) == DECISION_COLUMNS


def test_generate_workload_of_30000_conversations_gives_identical_rows(spark_engine,
                                                                       tmp_path):
    # 30,000 (was 100,000: 61 s of the suite's 15 minutes): still every R3 step decides some
    sizes = {"conversations": 30_000, "routes": 1_000, "seed": "42"}
    with DuckDBEngine() as duck:
        run_generate(duck, tmp_path / "duck", **sizes)
    run_generate(spark_engine, tmp_path / "spark", **sizes)
    for table in TEMPLATES:  # the generator itself is engine-independent
        assert read_rows(tmp_path / "spark" / f"{table}.parquet") == read_rows(
            tmp_path / "duck" / f"{table}.parquet"), table

    work = tmp_path / "duck"
    with DuckDBEngine() as duck:
        expected = resolve_to_rows(duck, work / "conversations.parquet", work,
                                   tmp_path / "d_duck")
    on_spark = resolve_to_rows(spark_engine, work / "conversations.parquet", work,
                               tmp_path / "d_spark")
    assert len(expected) == 30_000
    assert on_spark == expected
    decided_by = {decision(r).decided_by for r in expected}
    assert {"R3.1", "R3.2", "R3.3", "R3.5"} <= decided_by


def test_keys_whose_texts_share_a_hash_give_identical_rows(spark_engine, tmp_path,
                                                          monkeypatch):
    # Spark's key hash (xxhash64) cut to 2 bits: texts share hashes, the key join compares
    # the texts on both engines, and the rows are those of DuckDB's join by the hash
    from pybroker.apps.pipeline import resolve as resolve_module

    work = tmp_path / "work"
    with DuckDBEngine() as duck:
        run_generate(duck, work, conversations=3_000, routes=200, seed="5")
        by_hash = resolve_to_rows(duck, work / "conversations.parquet", work,
                                  tmp_path / "d_hash")
    monkeypatch.setattr(resolve_module, "KEY_HASH_BITS", 2)
    on_spark = resolve_to_rows(spark_engine, work / "conversations.parquet", work,
                               tmp_path / "d_spark")
    _, [(shared,)] = spark_engine.fetch("resolve_shared_keys")
    assert shared > 0
    assert len(by_hash) == 3_000 and on_spark == by_hash


def test_impact_gives_identical_rows(spark_engine, tmp_path):
    from datetime import datetime

    import pybroker
    from pybroker.apps.pipeline.schema import CONVERSATIONS

    file = tmp_path / "i.duckdb"
    with pybroker.connect(file) as inst:
        db = inst.create_database("Sales")
        db.create_route("Keep", service_name="K", address="tcp://keep:1")
        db.create_route("Two1", service_name="M", address="tcp://m1:1")
        db.create_route("Two2", service_name="M", address="tcp://m2:1")
    rows = [{"conversation_id": f"{o}-{s}{i}", "origin": o, "service_name": s,
             "broker_instance": None, "begin_time": datetime(2030, 1, 1)}
            for s in ("K", "M", "Z") for o in ("Sales", "outside") for i in range(200)]
    conv = write_rows(tmp_path / "c.parquet", CONVERSATIONS, rows)
    script = "DROP ROUTE Keep; CREATE ROUTE Two3 WITH SERVICE_NAME = 'M', ADDRESS = 'tcp://m3:1'"
    with DuckDBEngine() as duck:
        expected = run_impact(duck, conv, file, tmp_path / "duck", script=script,
                              database="Sales")
    on_spark = run_impact(spark_engine, conv, file, tmp_path / "spark", script=script,
                          database="Sales")
    assert on_spark == expected
    assert read_rows(tmp_path / "spark" / "changes") == read_rows(tmp_path / "duck" / "changes")
    changes: dict[tuple, int] = {}
    for r in expected:
        key = (r["service_name"], r["change"])
        changes[key] = changes.get(key, 0) + r["conversations"]
    assert changes[("K", "becomes DELAYED")] == 200
    # the R3 pick is re-dealt over three routes: draw % 2 and draw % 3 name different
    # routes for 4 of every 6 draws
    assert 100 < changes[("M", "moves")] < 170
    assert set(changes) == {("K", "becomes DELAYED"), ("M", "moves")}


def test_traffic_gives_identical_rows(spark_engine, tmp_path):
    state = tmp_path / "state"
    traffic_instance(state)
    with DuckDBEngine() as duck:
        expected = run_traffic(duck, state, tmp_path / "duck", as_of=AS_OF)
    on_spark = run_traffic(spark_engine, state, tmp_path / "spark", as_of=AS_OF)
    assert on_spark["rows"] == expected["rows"]
    for report in expected["rows"]:
        assert read_rows(tmp_path / "spark" / report) == read_rows(tmp_path / "duck" / report)
