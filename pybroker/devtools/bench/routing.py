"""``pybroker bench routing``: the routing targets, measured.

- warm ``Instance.route()``: p50 <= 20 us, p99 <= 100 us (comparison: a plain dict lookup
  of the same keys, in the same loop);
- decision right after a catalog change: <= 5 ms, for keys in use (affected by the change
  or not), new keys of services the catalog does not know, and (reported beside them) new
  keys of known services (the point path: the routing steps in Python on the catalog
  mirror's rows, no SQL; comparisons: one bound point query on the routes table, and the
  same key through the set-based routing query), and the first decision of a service right
  after a route for it was created;
- batch: 1,000,000 conversations against 10,000 routes through sql/routing/decide_route.sql
  at >= 1M conversations/s (comparison: one plain hash join of the same rows).

Each figure is the median of ``repeat`` runs in one process, on an instance file in a
temporary directory. The workload comes from the templates of sql/bench/.
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pybroker.api.instance import Instance
from pybroker.core.routing.cache import CatalogChange
from pybroker.devtools.bench.figures import machine, median_of

DATABASE = "Bench"
FULL = {"routes": 10_000, "conversations": 1_000_000, "warm_calls": 200_000, "cold_calls": 30}
QUICK = {"routes": 1_000, "conversations": 50_000, "warm_calls": 20_000, "cold_calls": 10}
TARGETS = {
    "warm_p50_us": 20.0,
    "warm_p99_us": 100.0,
    "cold_ms": 5.0,
    "batch_conversations_per_s": 1_000_000.0,
}


def run(*, repeat: int = 5, quick: bool = False) -> dict[str, Any]:
    sizes = QUICK if quick else FULL
    with (
        tempfile.TemporaryDirectory(prefix="pybroker-bench-") as tmp,
        Instance(Path(tmp) / "bench.duckdb") as inst,
    ):
        # DuckDB prints a progress bar to stdout, terminal or not, once a query runs over
        # 2 s (the batch does on a loaded machine): it would break --json
        inst.kernel.store.execute("SET enable_progress_bar_print = false")
        db = _build(inst, sizes["routes"])
        keys = _keys(sizes["routes"], db.broker_instance)
        warm = [_warm(inst, keys, sizes["warm_calls"]) for _ in range(repeat)]
        cold = [_cold(inst, keys, sizes["cold_calls"]) for _ in range(repeat)]
        batch = _batch(inst, db.database_id, sizes, repeat)
    return {
        "machine": machine(),
        "sizes": sizes,
        "repeat": repeat,
        "warm": median_of(warm),
        "cold": median_of(cold),
        "batch": batch,
        "targets": TARGETS,
    }


def format_report(report: dict[str, Any]) -> str:
    w, c, b, t = report["warm"], report["cold"], report["batch"], report["targets"]
    m = report["machine"]
    lines = [
        f"machine: {m['cpus']} CPUs, {m['platform']}, Python {m['python']}, "
        f"DuckDB {m['duckdb']}",
        f"sizes: {report['sizes']}; median of {report['repeat']} runs",
        "",
        f"warm route():   p50 {w['p50_us']:.2f} us, p99 {w['p99_us']:.2f} us "
        f"(target <= {t['warm_p50_us']:.0f} / {t['warm_p99_us']:.0f} us); "
        f"dict lookup p50 {w['baseline_p50_us']:.2f} us, ratio {w['ratio_p50']:.1f}x",
        f"after a catalog change (ALTER ROUTE, itself {c['write_ms']:.2f} ms incl. deciding "
        f"again the keys in use it voided), decision of a key (target <= {t['cold_ms']:.0f} "
        f"ms): in use, unaffected {c['known_key_ms']:.4f} ms; in use, affected "
        f"{c['affected_key_ms']:.4f} ms; new, unknown service {c['unseen_key_ms']:.4f} ms; "
        f"new, known service (point path) {c['first_time_key_ms']:.3f} ms; "
        f"point query on routes {c['baseline_ms']:.2f} ms, ratio {c['ratio_first_time']:.1f}x; "
        f"the same key through the routing query {c['first_time_query_ms']:.2f} ms, ratio "
        f"{c['ratio_first_time_to_query']:.2f}x",
        f"a route for a brand-new service (CREATE ROUTE {c['create_route_ms']:.2f} ms), then "
        f"that service's first decision {c['new_service_key_ms']:.3f} ms "
        f"(target <= {t['cold_ms']:.0f} ms)",
        f"batch:          {b['conversations']:,} conversations x {b['routes']:,} routes "
        f"({b['distinct_keys']:,} distinct keys) in {b['seconds']:.3f} s = "
        f"{b['conversations_per_s']:,.0f}/s (target >= {t['batch_conversations_per_s']:,.0f}/s)"
        f"; hash join {b['baseline_seconds']:.3f} s, ratio {b['ratio']:.2f}x",
    ]
    return "\n".join(lines)


# -- workload ------------------------------------------------------------------------------


def _build(inst: Instance, route_count: int):
    db = inst.create_database(DATABASE)
    db.create_queue("BenchQueue")
    params = {"database_id": db.database_id, "route_count": route_count, "now": inst.kernel.now()}
    with inst.kernel.write():
        inst.kernel.store.run("bench/generate_routes.sql", params)
        inst.kernel.store.run("bench/generate_services.sql", params)
    return db


def _keys(route_count: int, own_broker: str) -> list[tuple[str, str, str | None]]:
    """1,000 conversation keys spread over every kind of route (and some unknown services)."""
    rng = random.Random(7)
    keys = []
    for _ in range(1_000):
        service = f"svc_{rng.randrange(int(route_count * 1.1)):06d}"
        origin = "outside" if rng.random() < 0.1 else DATABASE
        broker = own_broker if rng.random() < 0.05 else None
        keys.append((origin, service, broker))
    return keys


# -- measurements --------------------------------------------------------------------------


def _percentiles(samples_ns: list[int]) -> tuple[float, float]:
    ordered = sorted(samples_ns)
    p50 = ordered[len(ordered) // 2] / 1000
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] / 1000
    return p50, p99


def _timed_loop(call: Callable[[str, str, str | None], Any], keys, calls: int) -> list[int]:
    clock = time.perf_counter_ns
    samples = []
    n = len(keys)
    for i in range(calls):
        origin, service, broker = keys[i % n]
        start = clock()
        call(origin, service, broker)
        samples.append(clock() - start)
    return samples


def _warm(inst: Instance, keys, calls: int) -> dict[str, float]:
    inst.route_many(keys)  # the one set-based query that makes every key warm

    def route(origin: str, service: str, broker: str | None):
        return inst.route(service, broker_instance=broker, origin=origin)

    table = {k: k for k in keys}

    def lookup(origin: str, service: str, broker: str | None):
        return table.get((origin, service, broker))

    p50, p99 = _percentiles(_timed_loop(route, keys, calls))
    b50, b99 = _percentiles(_timed_loop(lookup, keys, calls))
    return {"p50_us": p50, "p99_us": p99, "baseline_p50_us": b50, "baseline_p99_us": b99,
            "ratio_p50": p50 / b50}


def _cold(inst: Instance, keys, calls: int) -> dict[str, float]:
    """A catalog change (ALTER ROUTE of one service's route) and the decisions right after
    it, for each kind of key: in use and not affected by the change; in use and affected
    (voided, and decided again by the write); never decided, of a service the catalog does
    not know (answered from its origin's class answer); never decided, of a service the
    catalog knows (one run of the routing query: the truly cold case)."""
    db = inst.database(DATABASE)
    affected = (DATABASE, "svc_000000", None)  # BenchRoute000000's service (R2.2)
    in_use = set(keys)
    first_time = [(DATABASE, f"svc_{k:06d}", None) for k in range(1, 10_000)
                  if (DATABASE, f"svc_{k:06d}", None) not in in_use][:calls]
    inst.route_many([*keys, affected])
    series: dict[str, list[int]] = {name: [] for name in (
        "write", "known", "affected", "unseen", "first_time", "first_time_query", "create",
        "new_service", "baseline")}
    clock = time.perf_counter_ns

    def timed(name: str, call: Callable[[], Any]) -> Any:
        start = clock()
        result = call()
        series[name].append(clock() - start)
        return result

    for i in range(calls):
        address = f"tcp://changed{i}.example.com:4022"
        timed("write", lambda a=address: db.alter_route("BenchRoute000000", address=a))
        known = keys[i % len(keys)]
        timed("known", lambda k=known: inst.route(k[1], broker_instance=k[2], origin=k[0]))
        decision = timed("affected", lambda: inst.route(affected[1], origin=DATABASE))
        if decision.address != address:
            raise RuntimeError(f"routing answered {decision.address} after the change to "
                               f"{address}: a stale answer")
        name = f"NeverSeen{i}_{time.time_ns()}"
        timed("unseen", lambda n=name: inst.route(n, origin=DATABASE))
        fresh = first_time[i % len(first_time)]
        # never decided (and, as after a write naming the service, read again by the mirror)
        inst.kernel.routing.changed(CatalogChange(services=frozenset([fresh[1]])))
        timed("first_time", lambda k=fresh: inst.route(k[1], origin=k[0]))
        # comparison: the same key through the set-based routing query (the path every
        # never-decided key took before the point path)
        timed("first_time_query", lambda k=fresh: inst.kernel.routing.decide_plans(
            [k], inst.kernel.clock(), point=False))
        # a route for a brand-new service, and that service's first decision
        service = f"NewService{i}_{time.time_ns()}"
        timed("create", lambda s=service: db.create_route(
            f"New{s}", service_name=s, address="tcp://new.example.com:4022"))
        decision = timed("new_service", lambda s=service: inst.route(s, origin=DATABASE))
        if decision.route != f"New{service}":
            raise RuntimeError(f"routing answered {decision.route} for a new service's route")
        timed("baseline", lambda: inst.kernel.store.run(
            "instance/select_route.sql",
            {"database_id": db.database_id, "name": "BenchRoute000001"}))
    ms = {name: statistics.median(values) / 1e6 for name, values in series.items()}
    return {
        "write_ms": ms["write"], "known_key_ms": ms["known"],
        "affected_key_ms": ms["affected"], "unseen_key_ms": ms["unseen"],
        "first_time_key_ms": ms["first_time"], "baseline_ms": ms["baseline"],
        "ratio_first_time": ms["first_time"] / ms["baseline"],
        "first_time_query_ms": ms["first_time_query"],
        "ratio_first_time_to_query": ms["first_time"] / ms["first_time_query"],
        "create_route_ms": ms["create"], "new_service_key_ms": ms["new_service"],
    }


def _batch(inst: Instance, database_id: int, sizes: dict[str, int], repeat: int):
    store = inst.kernel.store
    params = {
        "conversation_count": sizes["conversations"], "route_count": sizes["routes"],
        "origin": DATABASE, "broker_instance": str(uuid.UUID(int=7)), "now": inst.kernel.now(),
    }
    store.run("bench/generate_conversations.sql", params)
    distinct = store.fetchall(
        "SELECT COUNT(*) FROM (SELECT DISTINCT origin, service_name, broker_instance "
        "FROM bench_conversations)"
    )[0][0]
    times, baseline = [], []
    for _ in range(repeat):
        start = time.perf_counter()
        _run_template(store, "bench/decide_into_table.sql", {},
                      conversations="bench_conversations", pick="random")
        times.append(time.perf_counter() - start)
        start = time.perf_counter()
        _run_template(store, "bench/hash_join_baseline.sql", {"database_id": database_id})
        baseline.append(time.perf_counter() - start)
    decided = store.fetchall("SELECT COUNT(*), COUNT(DISTINCT conversation_id) "
                             "FROM bench_decisions")[0]
    if decided[0] != sizes["conversations"] or decided[1] != sizes["conversations"]:
        raise RuntimeError(f"batch decided {decided} rows, expected one per conversation")
    seconds = statistics.median(times)
    base = statistics.median(baseline)
    return {
        "conversations": sizes["conversations"], "routes": sizes["routes"],
        "distinct_keys": distinct, "seconds": seconds,
        "conversations_per_s": sizes["conversations"] / seconds,
        "baseline_seconds": base, "ratio": seconds / base,
    }


def _run_template(store, template: str, params: dict[str, Any], **variables: Any) -> None:
    from pybroker.storage.templates import render

    store.execute(render(template, **variables), params or None)
