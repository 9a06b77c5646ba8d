"""``pybroker bench metrics``: how long one scrape of ``/metrics`` takes on an instance of
1,000 queues and 1,000,000 conversation endpoints (issue 48's figure: at most 200 ms).

The instance is a real file: one database whose queues are written in one INSERT
(sql/bench/generate_queues.sql) and whose conversation endpoints are those of ``pybroker
bench diagnose`` (sql/bench/generate_conversation_endpoints.sql), a few messages sent into
its own queue. What is measured is what the page does for each request: every family read
(pybroker/server/metrics.py) and written in the text format, the median of the runs.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from pybroker.api.instance import Instance
from pybroker.devtools.bench.figures import machine
from pybroker.server.metrics import read_families, render

QUEUES, ENDPOINTS = 1_000, 1_000_000
QUICK_QUEUES, QUICK_ENDPOINTS = 100, 100_000
DATABASE, SERVICE = "BenchMetrics", "BenchService"
MESSAGES = 100
TARGETS = {"seconds": 0.2}


def _build(path: Path, queues: int, endpoints: int) -> Instance:
    inst = Instance(path, worker=False)
    db = inst.create_database(DATABASE)
    db.create_queue("BenchQueue")
    db.create_service(SERVICE, queue="BenchQueue", contracts=["DEFAULT"])
    conversation = db.begin_dialog(SERVICE, SERVICE)
    with db.transaction():
        for n in range(MESSAGES):
            conversation.send(f"message {n}")
    params = {"database_id": db.database_id, "now": inst.kernel.now()}
    with inst.kernel.write():
        inst.kernel.store.run("bench/generate_queues.sql", {**params, "queue_count": queues})
        inst.kernel.store.run("bench/generate_conversation_endpoints.sql", {
            **params, "endpoint_count": endpoints, "service": SERVICE, "route_count": 1000})
    return inst


def run(repeat: int = 5, quick: bool = False) -> dict[str, Any]:
    queues, endpoints = (QUICK_QUEUES, QUICK_ENDPOINTS) if quick else (QUEUES, ENDPOINTS)
    with tempfile.TemporaryDirectory(prefix="pybroker-bench-metrics-") as where:
        started = time.perf_counter()
        inst = _build(Path(where) / "metrics.duckdb", queues, endpoints)
        build_seconds = time.perf_counter() - started
        try:
            seconds, size = [], 0
            for _ in range(repeat):
                started = time.perf_counter()
                size = len(render(read_families(inst.kernel)))
                seconds.append(time.perf_counter() - started)
        finally:
            inst.close()
    return {"machine": machine(), "queues": queues + 1, "endpoints": endpoints + 2,
            "repeat": repeat, "build_seconds": build_seconds,
            "seconds": statistics.median(seconds), "runs_seconds": seconds,
            "page_bytes": size, "targets": TARGETS}


def format_report(report: dict[str, Any]) -> str:
    return (f"one /metrics scrape of an instance of {report['queues']:,} queues and "
            f"{report['endpoints']:,} conversation endpoints: "
            f"{report['seconds'] * 1000:.1f} ms, the median of {report['repeat']} (target "
            f"<= {report['targets']['seconds'] * 1000:.0f} ms; a page of "
            f"{report['page_bytes']:,} bytes); the file built in "
            f"{report['build_seconds']:.1f} s (not counted)")
