"""``pybroker bench pipeline``: ``pipeline resolve`` of generated conversations on DuckDB and
on Spark ``local[2]`` (10,000,000 conversations against 100,000 routes).

The workload is written once by ``pipeline generate`` (DuckDB, seed 1). Each measured run
is a fresh child process (``python -m pybroker.devtools.bench.pipeline``) so that each engine's peak
memory is its own: the child reports the time of the resolve job alone (read Parquet,
decide, write Parquet; Spark's start-up is reported apart), its own peak RSS, and for Spark
the JVM's peak RSS (VmHWM of /proc/<pid>/status; in local mode the JVM is also the
executor). DuckDB runs with the pipeline's default memory limit (spilling beyond it), as
``pipeline resolve`` does. Figures are medians of ``repeat`` runs; the Spark/DuckDB ratio
compares the medians of the same invocation, and the decisions of the two engines' last
runs are compared by a checksum of every row (they must be identical).

Each engine's floor runs in the same invocation too (``run_floor``): the conversations read
and as many rows of the decisions' eleven columns written as Parquet, nothing decided
(sql/bench/pipeline_floor.sql), on DuckDB and on Spark (its start-up not counted, as for
resolve). Resolve over its own engine's floor is what deciding costs there; Spark's floor
over DuckDB's resolve says how much of the Spark/DuckDB ratio is Spark reading and writing
the rows at all.

Each child also reports the steps its engine ran (``Engine.steps``: each relation staged,
by its name, and the write, which on both engines also runs the decisions' joins, staged as
a view that the writer reads), and the report prints their medians as where each engine's
time goes; what no step covers (reading the Parquet footers, exporting, planning) is
printed as the rest.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb

from pybroker.apps.pipeline.engine import DEFAULT_MEMORY_LIMIT, Engine
from pybroker.apps.pipeline.schema import CONVERSATIONS
from pybroker.devtools.bench.figures import machine

FULL = {"conversations": 10_000_000, "routes": 100_000}
QUICK = {"conversations": 200_000, "routes": 2_000}
SPARK_MASTER = "local[2]"
SPARK_CONF = {"spark.driver.memory": "6g", "spark.sql.shuffle.partitions": "16"}
TARGET_PER_S = 1_000_000  # DuckDB, 10M x 100k, within the default memory limit
TARGET_PEAK_MB = 4096
TARGET_SPARK_RATIO = 3.0
# the measured runs: each engine's resolve and floor
ENGINES = ("duckdb", "floor", "spark", "spark_floor")
DECISION_COLUMNS = ("conversation_id", "outcome", "route", "address", "mirror_address",
                    "database", "broker_instance", "match_step", "choose_step", "locate_step",
                    "decided_by")


def run(
    *, repeat: int = 3, quick: bool = False, sizes: dict[str, int] | None = None
) -> dict[str, Any]:
    from pybroker.apps.pipeline.engine import DuckDBEngine
    from pybroker.apps.pipeline.generate import run_generate

    sizes = sizes or (QUICK if quick else FULL)
    with tempfile.TemporaryDirectory(prefix="pybroker-bench-pipeline-") as tmp:
        work = Path(tmp) / "work"
        start = time.perf_counter()
        with DuckDBEngine() as engine:
            run_generate(engine, work, conversations=sizes["conversations"],
                         routes=sizes["routes"], seed="1")
        generate_s = time.perf_counter() - start
        keys = _distinct_keys(work)
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in ENGINES}
        for engine_name in ENGINES:
            for i in range(repeat):
                runs[engine_name].append(
                    _child(engine_name, work, Path(tmp) / f"{engine_name}-{i}"))
        checksums = {name: decisions_checksum(Path(tmp) / f"{name}-{repeat - 1}")
                     for name in ("duckdb", "spark")}
    report: dict[str, Any] = {
        "machine": _machine(), "sizes": sizes, "repeat": repeat,
        "generate_seconds": generate_s, "distinct_keys": keys,
        "spark_master": SPARK_MASTER, "spark_conf": SPARK_CONF,
        "duckdb_memory_limit": DEFAULT_MEMORY_LIMIT,
        "checksums": checksums,
        "identical": checksums["duckdb"] == checksums["spark"],
    }
    for name, results in runs.items():
        seconds = statistics.median(r["seconds"] for r in results)
        report[name] = {
            "seconds": seconds,
            "conversations_per_s": sizes["conversations"] / seconds,
            "peak_rss_mb": max(r["peak_rss_mb"] for r in results),
            "jvm_peak_rss_mb": max(r.get("jvm_peak_rss_mb", 0.0) for r in results),
            "startup_seconds": statistics.median(r.get("startup_seconds", 0.0)
                                                 for r in results),
            "runs": [r["seconds"] for r in results],
            "steps": _median_steps(results),
        }
    report["ratio_spark_to_duckdb"] = report["spark"]["seconds"] / report["duckdb"]["seconds"]
    report["ratio_duckdb_to_floor"] = report["duckdb"]["seconds"] / report["floor"]["seconds"]
    report["ratio_spark_to_spark_floor"] = (report["spark"]["seconds"]
                                            / report["spark_floor"]["seconds"])
    report["ratio_spark_floor_to_duckdb"] = (report["spark_floor"]["seconds"]
                                             / report["duckdb"]["seconds"])
    return report


def format_report(report: dict[str, Any]) -> str:
    m, s, d, k = report["machine"], report["sizes"], report["duckdb"], report["spark"]
    f, sf = report["floor"], report["spark_floor"]
    full = s == FULL
    rate_met = d["conversations_per_s"] >= TARGET_PER_S
    rss_met = d["peak_rss_mb"] <= TARGET_PEAK_MB
    ratio = report["ratio_spark_to_duckdb"]
    rows, checksum = report["checksums"]["duckdb"]
    lines = [
        f"machine: {m['cpus']} CPUs, {m['platform']}, Python {m['python']}, "
        f"DuckDB {m['duckdb']}, PySpark {m['pyspark']}, Java {m['java']}",
        f"workload: {s['conversations']:,} conversations x {s['routes']:,} routes "
        f"({report['distinct_keys']:,} distinct (origin, service, broker) keys), generated in "
        f"{report['generate_seconds']:.1f} s; median of {report['repeat']} runs",
        f"duckdb:        {d['seconds']:.2f} s = {d['conversations_per_s']:,.0f} "
        f"conversations/s, peak RSS {d['peak_rss_mb']:,.0f} MB with memory_limit "
        f"{report['duckdb_memory_limit']} (runs {_runs(d)})",
        f"floor:         {f['seconds']:.2f} s = {f['conversations_per_s']:,.0f} rows/s read "
        f"and written as Parquet with nothing decided, peak RSS {f['peak_rss_mb']:,.0f} MB "
        f"(runs {_runs(f)}); resolve takes {report['ratio_duckdb_to_floor']:.2f}x the floor",
        f"spark {report['spark_master']}: {k['seconds']:.2f} s = "
        f"{k['conversations_per_s']:,.0f} conversations/s, peak RSS driver "
        f"{k['peak_rss_mb']:,.0f} MB + JVM {k['jvm_peak_rss_mb']:,.0f} MB, start-up "
        f"{k['startup_seconds']:.1f} s not included (runs {_runs(k)})",
        f"spark floor:   {sf['seconds']:.2f} s (runs {_runs(sf)}): Spark's resolve takes "
        f"{report['ratio_spark_to_spark_floor']:.2f}x its floor; the floor alone is "
        f"{report['ratio_spark_floor_to_duckdb']:.2f}x DuckDB's resolve",
        f"spark/duckdb:  {ratio:.2f}x the time",
        f"decisions:     {rows:,} rows, checksum {checksum:016x} on DuckDB; Spark's "
        + ("identical" if report["identical"] else "DIFFERENT: "
           f"{report['checksums']['spark'][0]:,} rows, checksum "
           f"{report['checksums']['spark'][1]:016x}"),
    ]
    for name in ENGINES:
        if report[name].get("steps"):
            lines.append(f"  where {name}'s time goes (median s): "
                         + _steps_text(report[name]))
    scale = "" if full else " (targets are set for 10M x 100k; this is a smaller workload)"
    lines.append(
        f"targets{scale}: DuckDB >= {TARGET_PER_S:,}/s {_met(rate_met)}, peak RSS <= "
        f"{TARGET_PEAK_MB:,} MB {_met(rss_met)}, Spark <= {TARGET_SPARK_RATIO:.0f}x DuckDB "
        f"{_met(ratio <= TARGET_SPARK_RATIO)}, identical rows {_met(report['identical'])}")
    return "\n".join(lines)


def _median_steps(results: list[dict[str, Any]]) -> dict[str, float]:
    """Each step's median seconds over the runs (a step run twice in one run counts
    as their sum), in the order of the first run."""
    per_run: list[dict[str, float]] = []
    for r in results:
        steps: dict[str, float] = {}
        for what, seconds in r.get("steps", []):
            steps[what] = steps.get(what, 0.0) + seconds
        per_run.append(steps)
    names = list(dict.fromkeys(name for steps in per_run for name in steps))
    return {name: statistics.median(steps.get(name, 0.0) for steps in per_run)
            for name in names}


def _steps_text(r: dict[str, Any]) -> str:
    steps = r["steps"]
    rest = r["seconds"] - sum(steps.values())
    return ", ".join([*(f"{name} {seconds:.2f}" for name, seconds in steps.items()),
                      f"the rest (reading, planning) {max(rest, 0.0):.2f}"])


def _met(ok: bool) -> str:
    return "met" if ok else "NOT met"


def decisions_checksum(output: Path) -> tuple[int, int]:
    """Rows and an order-free checksum (xor of each row's hash) of a decisions directory."""
    con = duckdb.connect()
    try:
        files = [str(p) for p in sorted(Path(output).glob("*.parquet"))]
        columns = ", ".join(f'"{c}"' for c in DECISION_COLUMNS)
        rows, checksum = con.read_parquet(files).aggregate(
            f"count(*), bit_xor(hash({columns}))").fetchone()
        return int(rows), int(checksum or 0)
    finally:
        con.close()


def _runs(r: dict[str, Any]) -> str:
    return ", ".join(f"{x:.2f}" for x in r["runs"])


def _distinct_keys(work: Path) -> int:
    con = duckdb.connect()
    try:
        files = [str(p) for p in sorted((work / "conversations.parquet").glob("*.parquet"))]
        rel = con.read_parquet(files)
        return len(rel.aggregate("origin, service_name, broker_instance",
                                 "origin, service_name, broker_instance").fetchall())
    finally:
        con.close()


def _child(engine: str, work: Path, out: Path) -> dict[str, Any]:
    args = [sys.executable, "-m", "pybroker.devtools.bench.pipeline", engine, str(work), str(out)]
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"bench child {engine} failed: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _measure(engine_name: str, work: Path, out: Path) -> dict[str, Any]:
    """One resolve run in this (child) process; ``floor`` and ``spark_floor``: the
    conversations read and the decisions' columns written with nothing decided
    (``run_floor``), on DuckDB and on Spark."""
    from pybroker.apps.pipeline.engine import DuckDBEngine, SparkEngine
    from pybroker.apps.pipeline.resolve import run_resolve

    result: dict[str, Any] = {}
    if engine_name == "floor":
        with DuckDBEngine() as floor:
            start = time.perf_counter()
            run_floor(floor, work, out)
            result["seconds"] = time.perf_counter() - start
            result["steps"] = floor.steps
        result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        return result
    start = time.perf_counter()
    engine = (DuckDBEngine() if engine_name == "duckdb"
              else SparkEngine(master=SPARK_MASTER, conf=SPARK_CONF))
    result["startup_seconds"] = time.perf_counter() - start
    try:
        start = time.perf_counter()
        if engine_name == "spark_floor":
            run_floor(engine, work, out)
        else:
            run_resolve(engine, work / "conversations.parquet", work, out)
        result["seconds"] = time.perf_counter() - start
        result["steps"] = engine.steps
        if isinstance(engine, SparkEngine):
            pid = engine.spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
            result["jvm_peak_rss_mb"] = _vm_hwm_mb(int(pid))
    finally:
        engine.close()
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return result


def run_floor(engine: Engine, work: Path, out: Path) -> None:
    """The floor of ``pipeline resolve`` on ``engine``: the conversations of ``work`` read,
    as many rows of the decisions' columns written to ``out``, nothing decided."""
    engine.read_parquet("conversations", work / "conversations.parquet", CONVERSATIONS)
    engine.stage("floor", "bench/pipeline_floor.sql", small=False,
                 conversations="conversations")
    engine.write("floor", out)


def _vm_hwm_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _machine() -> dict[str, Any]:
    import pyspark

    java = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False)
    return {
        **machine(),
        "pyspark": pyspark.__version__,
        "java": (java.stderr.splitlines() or ["?"])[0].split('"')[1 if '"' in java.stderr
                                                                 else 0],
    }


if __name__ == "__main__":  # a measured child run: ENGINE WORK OUT -> one JSON line
    parser = argparse.ArgumentParser()
    parser.add_argument("engine", choices=ENGINES)
    parser.add_argument("work", type=Path)
    parser.add_argument("out", type=Path)
    ns = parser.parse_args()
    print(json.dumps(_measure(ns.engine, ns.work, ns.out)))
