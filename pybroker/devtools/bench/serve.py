"""``pybroker bench serve``: many client processes on one served instance file, measured.

``pybroker serve FILE`` runs in a child process of its own (its Unix socket beside FILE in
a temp dir, its broker endpoint on a free port of 127.0.0.1); client processes
(``pybroker.devtools.bench.serve_child``) connect with ``pybroker.connect(FILE)``. 256-byte bodies.

- (a) SEND + RECEIVE through clients: each client has a slot of its own (an initiator and a
  target service with their queues), begins 10 conversations, sends M messages round robin
  in transactions of k, then RECEIVEs them all (``receive(max_messages=k)``, each its own
  transaction) checking their order. With 1 client, and with 8 clients at once (8 x M
  messages, timed from the first start to the last finish); messages/s, against the target
  of 8 clients together >= 50 % of the embedded rate, and C7's (transactions side by side)
  of >= 75 %.
- (b) while the 8 clients run, one more client process reads
  ``SELECT * FROM sys.transmission_queue`` through ``inst.sql()`` every 10 ms, as
  ``pybroker query`` would: the round trip of each (sent, run by the server, rows back),
  p50 and p99, against the target of p50 <= 10 ms, p99 <= 50 ms.
- (c) the server's memory per idle client connection: its resident memory (VmRSS of
  /proc/PID/status) before and after N connections that say HELLO, are welcomed and then
  say nothing, divided by N, against the target of <= 64 KB each. Measured once, first,
  on a server that has only its bench clients connected.
- (d) workers (C7, pybroker/devtools/bench/workers.py): 1, 4 and 8 client connections,
  each in a loop of one transaction that receives one message, processes it for 50 ms and
  commits, over 40 conversations; messages/s and the speed-up over one worker; and the
  same with a SEND of a reply inside each transaction before its processing.
- (e) the clients of (a) again while a thread scrapes the server's /metrics at once and
  then every second, as a Prometheus job does (the server always serves --http-port):
  messages/s against (a)'s in the same round, target >= 95 %.

Comparison, measured in the same run: the same workload (the same functions) embedded in
this process, on a copy of the file that no server holds (opened with its worker, as the
server's is), the 8 slots one after another (8 x M messages). CPU time per message of the
server and of the clients says where the time goes. Each figure is the median of
``repeat`` runs, after a warm-up round (first statements, first connections) that is not
counted.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pybroker
from pybroker.api.instance import Instance
from pybroker.devtools.bench import serve_child, workers
from pybroker.devtools.bench.child import JsonLinesChild
from pybroker.devtools.bench.figures import machine, machine_load, median_of, percentiles_ms

FULL = {"clients": 8, "messages": 2_000, "sends_per_transaction": 100, "conversations": 10,
        "idle_connections": 200, "query_interval_ms": 10, "workers_messages": 160,
        "workers_conversations": 40, "workers_processing": 0.05}
QUICK = {"clients": 8, "messages": 300, "sends_per_transaction": 100, "conversations": 10,
         "idle_connections": 200, "query_interval_ms": 10, "workers_messages": 16,
         "workers_conversations": 8, "workers_processing": 0.02}
TARGETS = {"ratio_clients_embedded": 0.5, "ratio_clients_embedded_c7": 0.75,
           "ratio_scraped": 0.95, "query_p50_ms": 10.0,
           "query_p99_ms": 50.0,
           "idle_kb_per_connection": 64.0}
STARTUP_TIMEOUT = 120.0
MAX_QUERIES = 100_000
IDLE_QUERIES = 50  # reads of the idle server, the comparison of (b)


def run(*, repeat: int = 3, quick: bool = False,
        sizes: dict[str, int] | None = None) -> dict[str, Any]:
    """Run the benchmark; ``sizes`` overrides FULL/QUICK (tests pass tiny ones)."""
    sizes = {**(QUICK if quick else FULL), **(sizes or {})}
    load_before = machine_load()
    runs: dict[str, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="pybroker-bench-serve-") as tmp:
        folder = Path(tmp)
        served, embedded = folder / "served.duckdb", folder / "embedded.duckdb"
        children: list[_Child] = []
        server: _Server | None = None
        stack = contextlib.ExitStack()
        try:
            # started first, so they import while the file is built; each connects at
            # its "hello"
            clients = [_Child(served, folder, f"client{i}") for i in range(sizes["clients"])]
            reader = _Child(served, folder, "query")
            children += [*clients, reader]
            with Instance(served, worker=False) as inst:
                serve_child.build(inst, sizes["clients"])
            shutil.copyfile(served, embedded)  # closed: the whole instance is in the file
            server = _Server(served, folder, sizes)
            for child in (*clients, reader):
                if not child.ask("hello")["client"]:
                    raise RuntimeError(f"{child.name} opened the file itself, not through "
                                       "the server")
            local = stack.enter_context(Instance(embedded))  # with its worker, as served
            idle = _idle_case(server, reader, sizes["idle_connections"])
            n = serve_child.names(0)  # slot 0's queue, empty again before (a) uses it
            side_by_side = workers.run_served(served, serve_child.DATABASE, n["initiator"],
                                              n["target"], n["target_queue"], sizes)
            writing = workers.run_served(served, serve_child.DATABASE, n["initiator"],
                                         n["target"], n["target_queue"], sizes, reply=True)
            warm = {**sizes, "messages": sizes["sends_per_transaction"]}
            _embedded(local, warm)
            _clients(server, clients, warm)
            for _ in range(repeat):
                runs.setdefault("embedded", []).append(_embedded(local, sizes))
                one, _ = _clients(server, clients[:1], sizes)
                runs.setdefault("one_client", []).append(one)
                many, query = _clients(server, clients, sizes, reader=reader,
                                       stop_file=folder / "stop")
                runs.setdefault("clients", []).append(many)
                runs.setdefault("query", []).append(query or {})
                with _Scraper(server.metrics_url, SCRAPE_INTERVAL) as scraper:
                    scraped, _ = _clients(server, clients, sizes)
                runs.setdefault("clients_scraped", []).append(
                    {**scraped, "scrapes": scraper.scrapes})
        finally:
            stack.close()
            for child in children:
                child.stop()
            if server is not None:
                server.stop()
    report: dict[str, Any] = {
        "machine": machine(),
        "load": {"before": load_before, "after": machine_load()},
        "sizes": sizes,
        "body_bytes": serve_child.BODY_BYTES,
        "repeat": repeat,
        "targets": TARGETS,
        "idle": idle,
        "workers": side_by_side,
        "workers_writing": writing,
    }
    report.update({name: median_of(r) for name, r in runs.items()})
    base = report["embedded"]["per_s"]
    for name in ("one_client", "clients"):
        report[name]["ratio_embedded"] = report[name]["per_s"] / base
    report["clients"]["met"] = (report["clients"]["ratio_embedded"]
                                >= TARGETS["ratio_clients_embedded"])
    # C7: with transactions side by side, the CPU-bound case too
    report["clients"]["met_c7"] = (report["clients"]["ratio_embedded"]
                                   >= TARGETS["ratio_clients_embedded_c7"])
    scraped = report["clients_scraped"]
    scraped["ratio_unscraped"] = scraped["per_s"] / report["clients"]["per_s"]
    scraped["met"] = scraped["ratio_unscraped"] >= TARGETS["ratio_scraped"]
    q = report["query"]
    q["met"] = q["p50_ms"] <= TARGETS["query_p50_ms"] and q["p99_ms"] <= TARGETS["query_p99_ms"]
    idle["met"] = idle["kb_per_connection"] <= TARGETS["idle_kb_per_connection"]
    return report


def format_report(report: dict[str, Any]) -> str:
    m, s, t = report["machine"], report["sizes"], report["targets"]
    e, one, many = report["embedded"], report["one_client"], report["clients"]
    q, idle = report["query"], report["idle"]
    n = s["clients"]

    def verdict(ok: bool) -> str:
        return "met" if ok else "MISSED"

    return "\n".join([
        f"machine: {m['cpus']} CPUs, {m['platform']}, Python {m['python']}, "
        f"DuckDB {m['duckdb']}; load average (1, 5, 15 min) before "
        f"{report['load']['before']}, after {report['load']['after']}",
        f"pybroker serve FILE in its own process, clients on its Unix socket; "
        f"{report['body_bytes']}-byte bodies, {s['conversations']} conversations and "
        f"{s['messages']:,} messages per client, {s['sends_per_transaction']} sends per "
        f"transaction, then RECEIVE of them all; median of {report['repeat']} runs",
        "",
        f"(a) SEND + RECEIVE: embedded (one process, no server, the {n} clients' work one "
        f"after another) {e['per_s']:,.0f} messages/s",
        f"    1 client {one['per_s']:,.0f}/s ({one['ratio_embedded']:.0%} of embedded); "
        f"{n} clients at once {many['per_s']:,.0f}/s together: {many['ratio_embedded']:.0%} "
        f"of embedded (target >= {t['ratio_clients_embedded']:.0%}: "
        f"{verdict(many['met'])}; C7's >= {t['ratio_clients_embedded_c7']:.0%}: "
        f"{verdict(many['met_c7'])})",
        f"    CPU per message: embedded {e['cpu_us_per_message']:,.0f} us; 1 client: server "
        f"{one['server_cpu_us_per_message']:,.0f} us, client "
        f"{one['client_cpu_us_per_message']:,.0f} us; {n} clients: server "
        f"{many['server_cpu_us_per_message']:,.0f} us, clients "
        f"{many['client_cpu_us_per_message']:,.0f} us",
        f"(b) {q['queries']:,.0f} reads of sys.transmission_queue through a client "
        f"(inst.sql(), every {s['query_interval_ms']} ms) while the {n} clients run: round "
        f"trip p50 {q['p50_ms']:.2f} ms, p99 {q['p99_ms']:.2f} ms (target <= "
        f"{t['query_p50_ms']:.0f} / {t['query_p99_ms']:.0f} ms: {verdict(q['met'])}); "
        f"idle server {q['idle_p50_ms']:.2f} ms p50",
        f"(c) {idle['connections']} idle client connections: server RSS "
        f"{idle['rss_before_mb']:,.1f} -> {idle['rss_after_mb']:,.1f} MB, "
        f"{idle['kb_per_connection']:,.1f} KB each (target <= "
        f"{t['idle_kb_per_connection']:.0f} KB: {verdict(idle['met'])}); "
        f"{idle['threads_added']} server threads added",
        f"(e) the {n} clients again while /metrics is scraped every "
        f"{SCRAPE_INTERVAL:g} s ({report['clients_scraped']['scrapes']:.0f} scrapes): "
        f"{report['clients_scraped']['per_s']:,.0f}/s, "
        f"{report['clients_scraped']['ratio_unscraped']:.0%} of the same without "
        f"(target >= {t['ratio_scraped']:.0%}: {verdict(report['clients_scraped']['met'])})",
        *workers.format_cases(report.get("workers", []),
                              "a client connection each, on the served file"),
        *workers.format_cases(report.get("workers_writing", []),
                              "a client connection each, on the served file"),
    ])


# -- the cases -------------------------------------------------------------------------------


def _embedded(local: Instance, sizes: dict[str, int]) -> dict[str, float]:
    """The clients' work, one slot after another, in this process."""
    db = local.database(serve_child.DATABASE)
    slots = range(sizes["clients"])
    convs = {slot: serve_child.begin(db, slot, sizes["conversations"]) for slot in slots}
    got = serve_child.run_slots(db, convs, sizes["messages"], sizes["sends_per_transaction"])
    total = sizes["messages"] * len(slots)
    if got["received"] != total:
        raise RuntimeError(f"embedded: {got['received']} of {total} messages came back")
    seconds = got["done"] - got["start"]
    return {"messages": total, "seconds": seconds, "per_s": total / seconds,
            "cpu_us_per_message": got["cpu_seconds"] / total * 1e6}


def _clients(server: _Server, clients: list[_Child], sizes: dict[str, int], *,
             reader: _Child | None = None, stop_file: Path | None = None,
             ) -> tuple[dict[str, float], dict[str, float] | None]:
    """Every client runs its own slot at once; with ``reader``, it queries meanwhile
    (then the query latencies are the second of the two)."""
    for slot, child in enumerate(clients):
        child.ask("begin", slots=[slot], conversations=sizes["conversations"])
    idle_latencies: list[float] = []
    if reader is not None:
        assert stop_file is not None
        with contextlib.suppress(FileNotFoundError):
            stop_file.unlink()
        # the same read with nothing else running: what the load adds to it
        idle_latencies = reader.ask("query", stop_file=str(stop_file), limit=IDLE_QUERIES,
                                    interval=0.002)["latencies"]
        reader.post("query", stop_file=str(stop_file), limit=MAX_QUERIES,
                    interval=sizes["query_interval_ms"] / 1e3)
    cpu = server.cpu_seconds()
    for slot, child in enumerate(clients):
        child.post("run", slots=[slot], messages=sizes["messages"],
                   per_tx=sizes["sends_per_transaction"])
    answers = [child.answer() for child in clients]
    server_cpu = server.cpu_seconds() - cpu
    if reader is not None:
        assert stop_file is not None
        stop_file.touch()
        query = reader.answer()
    total = sizes["messages"] * len(clients)
    received = sum(a["received"] for a in answers)
    if received != total:
        raise RuntimeError(f"{len(clients)} clients: {received} of {total} messages came back")
    seconds = max(a["done"] for a in answers) - min(a["start"] for a in answers)
    figures = {"messages": total, "seconds": seconds, "per_s": total / seconds,
               "server_cpu_us_per_message": server_cpu / total * 1e6,
               "client_cpu_us_per_message": sum(a["cpu_seconds"] for a in answers)
               / total * 1e6}
    if reader is None:
        return figures, None
    latencies = query["latencies"]
    if not latencies:
        raise RuntimeError("the query client ran no query while the clients ran")
    return figures, {"queries": len(latencies), **percentiles_ms(latencies),
                     "idle_p50_ms": percentiles_ms(idle_latencies)["p50_ms"],
                     "rows_max": query["rows_max"]}


def _idle_case(server: _Server, child: _Child, count: int) -> dict[str, Any]:
    """The server's resident memory before and after ``count`` idle connections."""
    child.ask("idle", count=4)  # warm: the first connections' one-time costs
    child.ask("close_idle")
    threads = server.wait_threads(lambda n: True, settle=True)
    before = server.rss_bytes()
    opened = child.ask("idle", count=count)["opened"]
    added = server.wait_threads(lambda n: n >= threads + count, settle=True) - threads
    after = server.rss_bytes()
    child.ask("close_idle")
    server.wait_threads(lambda n: n <= threads)
    return {"connections": opened, "threads_added": added,
            "rss_before_mb": before / 2**20, "rss_after_mb": after / 2**20,
            "kb_per_connection": (after - before) / opened / 1024}


# -- the processes ---------------------------------------------------------------------------


def _env() -> dict[str, str]:
    env = dict(os.environ)
    # the children run the same pybroker as this process (a worktree, say)
    root = str(Path(pybroker.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


SCRAPE_INTERVAL = 1.0  # seconds between case (e)'s scrapes, as a Prometheus job's


class _Scraper:
    """A thread that GETs ``url`` at once and then every ``interval`` seconds, as
    Prometheus does, until the block ends; how many scrapes answered 200."""

    def __init__(self, url: str, interval: float) -> None:
        self.url, self.interval = url, interval
        self.scrapes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> _Scraper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(OSError), urllib.request.urlopen(
                    self.url, timeout=30) as answer:
                answer.read()
                self.scrapes += answer.status == 200
            self._stop.wait(self.interval)


class _Server:
    """``pybroker serve FILE`` in its own process, stopped by its pid."""

    def __init__(self, path: Path, folder: Path, sizes: dict[str, int]) -> None:
        self.stderr_path = folder / "server.stderr"
        # every bench client, the idle connections and room to spare
        max_clients = sizes["clients"] + sizes["idle_connections"] + 16
        with open(self.stderr_path, "w") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "pybroker", "serve", str(path), "--port", "0",
                 "--max-clients", str(max_clients), "--quiet", "--http-port", "0",
                 "--http-no-auth"],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err, text=True,
                env=_env())
        self.pid = self.proc.pid
        try:
            said = self._wait_for(("clients on ", "metrics on "))
        except BaseException:
            self.stop()
            raise
        self.metrics_url = said["metrics on "].split()[-1]  # what case (e) scrapes

    def _wait_for(self, prefixes: tuple[str, ...]) -> dict[str, str]:
        """The first line of stdout starting with each of ``prefixes``, by prefix."""
        assert self.proc.stdout is not None
        said: dict[str, str] = {}
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"pybroker serve ended: {self._stderr_tail()}")
            said.update({p: line.strip() for p in prefixes if line.startswith(p)})
            if len(said) == len(prefixes):
                return said
        raise RuntimeError(f"pybroker serve did not say {prefixes!r} in "
                           f"{STARTUP_TIMEOUT:.0f} s")

    def _status(self) -> dict[str, str]:
        with open(f"/proc/{self.pid}/status") as f:
            return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)

    def rss_bytes(self) -> int:
        return int(self._status()["VmRSS"].split()[0]) * 1024  # kB

    def threads(self) -> int:
        return int(self._status()["Threads"])

    def cpu_seconds(self) -> float:
        with open(f"/proc/{self.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime

    def wait_threads(self, done: Any, *, settle: bool = False, limit: float = 30.0) -> int:
        """The server's thread count once ``done(count)`` holds (and, with ``settle``, has
        not changed for 0.5 s), at most ``limit`` seconds."""
        deadline = time.monotonic() + limit
        last, since = self.threads(), time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(0.05)
            now = self.threads()
            if now != last:
                last, since = now, time.monotonic()
            if done(now) and (not settle or time.monotonic() - since >= 0.5):
                return now
        raise RuntimeError(f"the server's threads did not settle in {limit:.0f} s ({last})")

    def _stderr_tail(self) -> str:
        with contextlib.suppress(OSError):
            return self.stderr_path.read_text()[-2000:]
        return ""

    def stop(self) -> None:
        """SIGTERM (it stops and closes the file); after 30 s, SIGKILL; by its pid."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        if self.proc.stdout is not None:
            with contextlib.suppress(OSError):
                self.proc.stdout.close()


class _Child(JsonLinesChild):
    """One serve_child process."""

    def __init__(self, path: Path, folder: Path, name: str) -> None:
        super().__init__(name, [sys.executable, "-m", "pybroker.devtools.bench.serve_child",
                                str(path)],
                         folder / f"{name}.stderr", env=_env())

