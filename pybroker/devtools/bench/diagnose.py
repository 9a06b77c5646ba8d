"""``pybroker bench diagnose``: how long ``pybroker diagnose`` takes over three instance
files of 10,000 routes and 1,000,000 conversation endpoints each (issue 47's figure: at most
10 s).

Each file is a real instance (its broker endpoint defined on a port of its own, each trusting
the others' certificates, one database with a queue and a service) whose routes are those of
``pybroker bench routing`` (sql/bench/generate_routes.sql: every matching and choosing step,
to addresses no instance named listens on) and whose conversation endpoints are written in
one INSERT each (sql/bench/generate_conversation_endpoints.sql: CONVERSING, the
fire-and-forget leak's DISCONNECTED_INBOUND targets, CLOSED initiators, over two hours).
Building them is timed apart; what is measured is ``pybroker.diagnose`` over the three files,
opened read-only as the command opens them, every rule run: the median of the runs.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from pybroker.api.instance import Instance
from pybroker.apps.diagnose.report import diagnose
from pybroker.devtools.bench.figures import machine, machine_load

ROUTES, ENDPOINTS = 10_000, 1_000_000
QUICK_ROUTES, QUICK_ENDPOINTS = 1_000, 100_000
INSTANCES = 3
FIRST_PORT = 47_401  # defined in the files, never listened on
DATABASE, SERVICE = "BenchDiagnose", "BenchInitiator"
TARGETS = {"seconds": 10.0}


def _build(path: Path, port: int, routes: int, endpoints: int) -> Instance:
    inst = Instance(path, worker=False)
    inst.database("master").execute(
        "CREATE CERTIFICATE Own WITH SUBJECT = 'endpoint';"
        f"CREATE ENDPOINT BrokerEndpoint STATE = STARTED AS TCP (LISTENER_PORT = {port}, "
        "LISTENER_IP = (127.0.0.1)) FOR SERVICE_BROKER (AUTHENTICATION = CERTIFICATE Own)")
    db = inst.create_database(DATABASE)
    db.create_queue("BenchQueue")
    db.create_service(SERVICE, queue="BenchQueue", contracts=["DEFAULT"])
    params = {"database_id": db.database_id, "route_count": routes, "now": inst.kernel.now()}
    with inst.kernel.write():
        inst.kernel.store.run("bench/generate_routes.sql", params)
        inst.kernel.store.run("bench/generate_services.sql", params)
        inst.kernel.store.run("bench/generate_conversation_endpoints.sql", {
            **params, "endpoint_count": endpoints, "service": SERVICE})
    return inst


def _build_all(where: Path, routes: int, endpoints: int) -> list[Path]:
    paths = [where / f"instance{i}.duckdb" for i in range(INSTANCES)]
    insts = [_build(p, FIRST_PORT + i, routes, endpoints) for i, p in enumerate(paths)]
    try:
        pems = [inst.certificate for inst in insts]
        for i, inst in enumerate(insts):
            for j, pem in enumerate(pems):
                if i != j:
                    inst.trust(f"peer{j}", pem)
    finally:
        for inst in insts:
            inst.close()
    return paths


def run(repeat: int = 3, quick: bool = False) -> dict[str, Any]:
    routes, endpoints = (QUICK_ROUTES, QUICK_ENDPOINTS) if quick else (ROUTES, ENDPOINTS)
    with tempfile.TemporaryDirectory(prefix="pybroker-bench-diagnose-") as where:
        started = time.perf_counter()
        paths = _build_all(Path(where), routes, endpoints)
        build_seconds = time.perf_counter() - started
        seconds, findings = [], []
        load_before = machine_load()
        for _ in range(repeat):
            started = time.perf_counter()
            findings = diagnose(paths)
            seconds.append(time.perf_counter() - started)
    by_code = Counter(f.code for f in findings)
    median = statistics.median(seconds)
    return {"machine": machine(), "instances": INSTANCES, "routes_per_instance": routes,
            "endpoints_per_instance": endpoints, "repeat": repeat,
            "build_seconds": build_seconds, "seconds": median,
            "runs_seconds": seconds, "findings": len(findings),
            "findings_by_code": dict(sorted(by_code.items())), "targets": TARGETS,
            "target_met": median <= TARGETS["seconds"],
            "load": {"before": load_before, "after": machine_load()}}


def format_report(report: dict[str, Any]) -> str:
    by_code = ", ".join(f"{code} {count:,}" for code, count in
                        report["findings_by_code"].items()) or "none"
    return "\n".join([
        f"diagnose over {report['instances']} instance files of "
        f"{report['routes_per_instance']:,} routes and {report['endpoints_per_instance']:,} "
        f"conversation endpoints each: {report['seconds']:.2f} s, the median of "
        f"{report['repeat']} (target <= {report['targets']['seconds']:.0f} s: "
        f"{'met' if report['target_met'] else 'not met'}); files built in "
        f"{report['build_seconds']:.1f} s (not counted); runs "
        + ", ".join(f"{s:.2f}" for s in report["runs_seconds"])
        + f" s; load averages {report['load']['before']} before, "
        f"{report['load']['after']} after",
        f"findings: {report['findings']:,} ({by_code})",
    ])
