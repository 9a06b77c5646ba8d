"""``pybroker bench wire``: the wire targets, measured between two processes.

Two instances in two child processes (``pybroker.devtools.bench.wire_child``), each with its own
file in a temp dir and its endpoint on a free port of 127.0.0.1, mutual TLS 1.3, trusting
each other by certificate (exchanged through files), routes both ways. 256-byte bodies,
durable end to end: a case ends when the receiver has committed its last RECEIVE and the
sender's transmission queue is empty (every row acknowledged, which the receiver does
only after its commit, P5.2).

- (a) 1 conversation and (b) 100 conversations (round robin): 1,000 sends per
  transaction; the receiver drains with ``receive(max_messages=1000)`` in transactions;
  messages/s end to end = messages / (first SEND -> both conditions above hold);
- (c) paced at 1,000 messages/s on one conversation: each body carries time.time() at its
  SEND, the send commits alone (several only when the sender fell behind); latency =
  the receiver's commit time of its RECEIVE - the stamp (p50/p99); and where it goes, p50
  of each step: SEND committed, frame handed to the connection (the sender's transport),
  arrival committed (the receiver's engine writer), RECEIVE returned (a RECEIVE that
  waited commits before it returns), RECEIVE committed (the batched RECEIVEs after it);
- (d) 1 MiB bodies (a few per transaction): MB/s end to end (1 MB = 10^6 bytes);
- (e) case (b)'s workload through a forwarder: A -> F -> B, F a third child process with
  forwarding on and msdb routes both ways (R7), holding nothing durable, so "durable end to
  end" is as in (b): B committed and A's transmission queue empty (B's acknowledgements come
  back through F). Reported beside (b) of the same run as a ratio (target >= 0.70), with
  F's peak resident memory (VmHWM of /proc/PID/status) beside its ``forwarding_size_mb``:
  the bound is forwarding_size_mb + FORWARDER_RSS_ALLOWANCE_MB.

Comparisons in the same run: the same workload inside one instance file (local delivery,
the sender on the main thread and the receiver on another, the same functions), and raw
framed bytes: ``pybroker.core.wire.frames`` MESSAGE frames of the same bodies over a mutual TLS
1.3 loopback connection between the same two processes, with the same certificates,
decoded by ``FrameDecoder`` at the far end (no MAC, no DuckDB, no acknowledgement).

For (c) also the storage floor (pybroker/devtools/bench/wire_floors.py): the three durable commits
a message's path needs in a row (the SEND's, the arrival's, the RECEIVE's), each one
bare-table statement and a COMMIT on two instance files in one thread (``commit_floor``):
no design that commits each step durably on DuckDB gets under it. And the same three
commits at (c)'s pace (``paced_floor``): a sender thread commits the messages due, an
arrival thread commits what it was handed, a RECEIVE thread takes and commits what
arrived; the receiver's two share one connection, as an instance's arrivals and RECEIVEs
do. At a pace where one message's commits in a row take longer than the gap between
messages, each step must batch, and this floor shows what that costs before anything of
pybroker's is added. It runs a second time with the RECEIVE thread on a connection of its
own to the receiver's file (``connections=2``: arrival and RECEIVE in concurrent
transactions, which an instance does not do), to show what that design would take off.
For (c) and these floors, the CPUs they keep busy: CPU time of their processes over their
wall time.

For (a) and (b) also the storage floor of their row work (``stream_floor``), in bare
tables in this process: the wire's (two files; a sender thread commits each batch of the
SEND's rows and hands it over, an arrival thread commits the batches handed over
meanwhile, a RECEIVE thread takes and commits what arrived, and an acknowledgement thread
deletes and commits each batch that arrived from the sender's file, each file's two
threads sharing its connection as an instance's do) against local delivery's (one file,
the same batches in, then out), one after the other in each run. No frame, no endpoint, no
Python of pybroker's: the floors' ratio is what the files alone allow (b). Were the wire's
floor below 0.70 of local delivery's, the wire could meet (b)'s target only by adding less
above its floor than local delivery adds above its own.

For (a) and (b) also the CPUs each process keeps busy (its median CPU a message times the
median rate), and the CPUs both would keep busy at the target share's rate (0.70 of local
delivery's) spending the CPU a message they spend now: an instance's Python runs one
thread at a time, so a process cannot keep much more than one CPU busy, and the two
together no more than the machine has.

Each figure is the median of ``repeat`` runs. A warm-up round (the connection's TLS
handshake, first routing decisions) comes before the first run and is not counted.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pybroker
from pybroker.api.instance import Instance
from pybroker.devtools.bench import wire_child, wire_floors
from pybroker.devtools.bench.child import JsonLinesChild
from pybroker.devtools.bench.figures import machine, machine_load, median_of, percentiles_ms

BODY_BYTES = 256
LARGE_BYTES = 2**20
FULL = {"messages": 10_000, "conversations": 100, "sends_per_transaction": 1_000,
        "paced": 3_000, "rate": 1_000, "large": 50, "large_per_transaction": 5,
        "raw_frames": 100_000}
QUICK = {"messages": 2_000, "conversations": 100, "sends_per_transaction": 1_000,
         "paced": 500, "rate": 1_000, "large": 10, "large_per_transaction": 5,
         "raw_frames": 20_000}
TARGETS = {"messages_per_s": 10_000.0, "p50_ms": 2.0, "p99_ms": 10.0, "mb_per_s": 50.0,
           "forwarded_ratio": 0.70,
           # against comparisons of the same run, which a noisy machine cannot fake:
           "local_share": 0.70,  # (b)'s rate over local delivery's
           "floor_p50_ratio": 1.5, "floor_p99_ratio": 4.0}  # (c) over the storage floor
CASES = ("one_conversation", "many_conversations", "paced", "large")
# (e)'s memory bound beyond forwarding_size_mb: what a forwarder process holds with nothing
# forwarded (Python, DuckDB, the instance, TLS), measured, with room for the allocator
FORWARDER_RSS_ALLOWANCE_MB = 160
STARTUP_TIMEOUT = 120.0
FLOOR_SAMPLES = 500  # messages through (c)'s storage floor per run


def run(*, repeat: int = 3, quick: bool = False, sizes: dict[str, int] | None = None,
        retry_scale: float = 1.0, profile_dir: str | None = None) -> dict[str, Any]:
    """Run the benchmark; ``sizes`` overrides FULL/QUICK (tests pass tiny ones).
    ``profile_dir``: the children run under cProfile and leave sender.prof,
    receiver.prof and forwarder.prof there."""
    sizes = {**(QUICK if quick else FULL), **(sizes or {})}
    runs: dict[str, list[dict[str, float]]] = {}
    load_before = machine_load()

    def add(name: str, figures: dict[str, float]) -> None:
        runs.setdefault(name, []).append(figures)

    with tempfile.TemporaryDirectory(prefix="pybroker-bench-wire-") as tmp:
        folder = Path(tmp)
        with WirePair(folder, retry_scale, profile_dir) as pair:
            pair.warm_up()
            forwarder_idle = _rss_mb(pair.pids["forwarder"])
            with Instance(folder / "local.duckdb", worker=False) as local:
                # DuckDB draws a progress bar on stdout for long statements (1 MiB bodies):
                # not in this process's report (the children's stdout is their replies)
                local.kernel.store.connection.execute("SET enable_progress_bar = false")
                local_db = wire_child.build(local, "local")
                target_db = local.database(wire_child.TARGET_DB)
                _local_stream(local_db, target_db, 1, {**sizes, "messages": 100})  # warm-up
                for _ in range(repeat):
                    add("one_conversation", pair.stream(1, sizes))
                    add("many_conversations", pair.stream(sizes["conversations"], sizes))
                    add("forwarded", pair.stream(sizes["conversations"], sizes,
                                                 forwarded=True))
                    add("paced", pair.paced(sizes))
                    add("large", pair.stream(1, sizes, large=True))
                    add("local_one_conversation", _local_stream(local_db, target_db, 1, sizes))
                    add("local_many_conversations", _local_stream(
                        local_db, target_db, sizes["conversations"], sizes))
                    add("local_paced", _local_paced(local_db, target_db, sizes))
                    add("local_large", _local_stream(local_db, target_db, 1, sizes,
                                                     large=True))
                    add("raw_stream", pair.raw(sizes["raw_frames"], BODY_BYTES))
                    add("raw_paced", pair.raw(sizes["paced"], BODY_BYTES,
                                              rate=sizes["rate"]))
                    add("raw_large", pair.raw(sizes["large"], LARGE_BYTES))
                    add("commit_floor", wire_floors.commit_floor(
                        folder, min(sizes["paced"], FLOOR_SAMPLES), BODY_BYTES))
                    add("stream_floor", wire_floors.stream_floor(folder, sizes, BODY_BYTES))
                    add("paced_floor", wire_floors.paced_floor(
                        folder, sizes["paced"], sizes["rate"], BODY_BYTES))
                    add("paced_floor_two_connections", wire_floors.paced_floor(
                        folder, sizes["paced"], sizes["rate"], BODY_BYTES, connections=2))
            forwarder_peak = _rss_mb(pair.pids["forwarder"], "VmHWM")
            forwarding_size_mb = pair.forwarding_size_mb
    report: dict[str, Any] = {
        "machine": machine(),
        "load": {"before": load_before, "after": machine_load()},
        "sizes": sizes,
        "body_bytes": BODY_BYTES,
        "large_body_bytes": LARGE_BYTES,
        "repeat": repeat,
        "targets": TARGETS,
    }
    report.update({name: median_of(r) for name, r in runs.items()})
    for name in ("one_conversation", "many_conversations"):
        r = report[name]
        r["ratio_local"] = report[f"local_{name}"]["end_to_end_per_s"] / r["end_to_end_per_s"]
        r["ratio_raw"] = report["raw_stream"]["frames_per_s"] / r["end_to_end_per_s"]
        r["met"] = r["end_to_end_per_s"] >= TARGETS["messages_per_s"]
        r["local_share"] = 1 / r["ratio_local"]
        r["local_share_met"] = r["local_share"] >= TARGETS["local_share"]
        # the CPUs the two processes keep busy (the medians' CPU a message times their
        # rate), and would at the target share's rate with the CPU a message they spend now
        both = r["sender_cpu_us_per_message"] + r["receiver_cpu_us_per_message"]
        r["sender_cpus_busy"] = r["sender_cpu_us_per_message"] * r["end_to_end_per_s"] / 1e6
        r["receiver_cpus_busy"] = (r["receiver_cpu_us_per_message"] * r["end_to_end_per_s"]
                                   / 1e6)
        r["target_per_s"] = (TARGETS["local_share"]
                             * report[f"local_{name}"]["end_to_end_per_s"])
        r["cpus_at_target"] = both * r["target_per_s"] / 1e6
    f = report["stream_floor"]
    f["local_share"] = f["wire_per_s"] / f["local_per_s"]
    p = report["paced"]
    p["ratio_local_p50"] = p["p50_ms"] / report["local_paced"]["p50_ms"]
    p["ratio_raw_p50"] = p["p50_ms"] / report["raw_paced"]["p50_ms"]
    p["met"] = p["p50_ms"] <= TARGETS["p50_ms"] and p["p99_ms"] <= TARGETS["p99_ms"]
    p["ratio_floor_p50"] = p["p50_ms"] / report["commit_floor"]["p50_ms"]
    p["ratio_floor_p99"] = p["p99_ms"] / report["commit_floor"]["p99_ms"]
    p["ratio_paced_floor_p50"] = p["p50_ms"] / report["paced_floor"]["p50_ms"]
    p["ratio_paced_floor_p99"] = p["p99_ms"] / report["paced_floor"]["p99_ms"]
    p["ratio_paced_floor_two_connections_p50"] = (
        p["p50_ms"] / report["paced_floor_two_connections"]["p50_ms"])
    p["floor_met"] = (p["ratio_floor_p50"] <= TARGETS["floor_p50_ratio"]
                      and p["ratio_floor_p99"] <= TARGETS["floor_p99_ratio"])
    g = report["large"]
    g["ratio_local"] = report["local_large"]["mb_per_s"] / g["mb_per_s"]
    g["ratio_raw"] = report["raw_large"]["mb_per_s"] / g["mb_per_s"]
    g["met"] = g["mb_per_s"] >= TARGETS["mb_per_s"]
    e = report["forwarded"]
    e["ratio_direct"] = e["end_to_end_per_s"] / report["many_conversations"]["end_to_end_per_s"]
    e["met"] = e["ratio_direct"] >= TARGETS["forwarded_ratio"]
    e["forwarding_size_mb"] = forwarding_size_mb
    e["forwarder_idle_rss_mb"] = forwarder_idle  # after the warm-up, before the runs
    e["forwarder_peak_rss_mb"] = forwarder_peak  # VmHWM: the most it ever held
    e["forwarder_rss_bound_mb"] = forwarding_size_mb + FORWARDER_RSS_ALLOWANCE_MB
    e["memory_met"] = None if forwarder_peak is None else (
        forwarder_peak <= e["forwarder_rss_bound_mb"])
    return report


def format_report(report: dict[str, Any]) -> str:
    m, s, t = report["machine"], report["sizes"], report["targets"]
    a, b, c, d = (report[n] for n in CASES)
    la, lb, lc, ld = (report[f"local_{n}"] for n in CASES)
    rs, rp, rl = report["raw_stream"], report["raw_paced"], report["raw_large"]
    cf, e, pf = report["commit_floor"], report["forwarded"], report["paced_floor"]
    pf2 = report["paced_floor_two_connections"]
    sf = report["stream_floor"]

    def verdict(ok: bool) -> str:
        return "met" if ok else "MISSED"

    lines = [
        f"machine: {m['cpus']} CPUs, {m['platform']}, Python {m['python']}, "
        f"DuckDB {m['duckdb']}; load average (1, 5, 15 min) before "
        f"{report['load']['before']}, after {report['load']['after']}",
        f"two instances in two processes, 127.0.0.1, mutual TLS 1.3, file-backed, "
        f"{report['body_bytes']}-byte bodies, durable end to end (receiver committed, sender's "
        f"row deleted); median of {report['repeat']} runs",
        "",
    ]
    for r, lr, title in ((a, la, "(a) 1 conversation"),
                         (b, lb, f"(b) {s['conversations']} conversations")):
        lines += [
            f"{title}, {s['messages']:,} messages, {s['sends_per_transaction']:,} sends per "
            f"transaction: end to end {r['end_to_end_per_s']:,.0f}/s (target >= "
            f"{t['messages_per_s']:,.0f}/s: {verdict(r['met'])})",
            f"    sent (committed) {r['sent_per_s']:,.0f}/s; acknowledged (sender's transmission "
            f"queue empty) {r['acknowledged_per_s']:,.0f}/s; RECEIVEd (committed) "
            f"{r['received_per_s']:,.0f}/s",
            f"    local delivery (one instance) {lr['end_to_end_per_s']:,.0f}/s: "
            f"{r['ratio_local']:.1f}x (the wire at {r['local_share']:.2f} of it, target >= "
            f"{t['local_share']:.2f}: {verdict(r['local_share_met'])}); raw frames over TLS "
            f"{rs['frames_per_s']:,.0f}/s: {r['ratio_raw']:.0f}x",
            f"    CPU per message: sender {r['sender_cpu_us_per_message']:,.0f} us"
            f"{_by_thread(r, 'sender')}, receiver {r['receiver_cpu_us_per_message']:,.0f} us"
            f"{_by_thread(r, 'receiver')}; local delivery (both sides) "
            f"{lr['cpu_us_per_message']:,.0f} us",
            f"    CPUs kept busy (of {m['cpus']}): sender {r['sender_cpus_busy']:.2f}, receiver "
            f"{r['receiver_cpus_busy']:.2f}; at the target share's rate "
            f"({r['target_per_s']:,.0f}/s) this CPU a message would keep "
            f"{r['cpus_at_target']:.2f} busy",
        ]
    lines += [
        f"    storage floor of (b)'s rows (bare tables, nothing of pybroker's): the wire's "
        f"(two files, pipelined) {sf['wire_per_s']:,.0f}/s, {sf['wire_cpu_us_per_message']:,.0f} "
        f"us a message; local delivery's (one file) {sf['local_per_s']:,.0f}/s, "
        f"{sf['local_cpu_us_per_message']:,.0f} us: the wire's floor at {sf['local_share']:.2f} "
        f"of local's",
    ]
    lines += [
        f"(c) paced at {s['rate']:,}/s, {s['paced']:,} messages on 1 conversation: SEND -> "
        f"RECEIVE committed p50 {c['p50_ms']:.2f} ms, p99 {c['p99_ms']:.2f} ms (target <= "
        f"{t['p50_ms']:.0f} / {t['p99_ms']:.0f} ms: {verdict(c['met'])}); sent "
        f"{c['sent_per_s']:,.0f}/s, {c['messages_per_transaction']:.2f} messages per send "
        f"transaction",
        f"    local delivery p50 {lc['p50_ms']:.2f} ms, p99 {lc['p99_ms']:.2f} ms; raw frames "
        f"p50 {rp['p50_ms']:.3f} ms, p99 {rp['p99_ms']:.3f} ms",
        f"    storage floor (the SEND's, the arrival's and the RECEIVE's durable commits in a "
        f"row, bare tables): p50 {cf['p50_ms']:.2f} ms, p99 {cf['p99_ms']:.2f} ms; "
        f"wire/floor p50 {c['ratio_floor_p50']:.1f}x, p99 {c['ratio_floor_p99']:.1f}x (target <= "
        f"{t['floor_p50_ratio']:.1f}x / {t['floor_p99_ratio']:.0f}x: {verdict(c['floor_met'])})",
        f"    the same commits at the same pace ({s['rate']:,}/s; the receiver's arrival and "
        f"RECEIVE on one connection, each step batching what is due): p50 "
        f"{pf['p50_ms']:.2f} ms, p99 {pf['p99_ms']:.2f} ms, {pf['messages_per_transaction']:.2f} "
        f"messages per RECEIVE transaction; wire/paced floor p50 "
        f"{c['ratio_paced_floor_p50']:.1f}x, p99 {c['ratio_paced_floor_p99']:.1f}x; the "
        f"receiver's arrival and RECEIVE on two connections (concurrent transactions): p50 "
        f"{pf2['p50_ms']:.2f} ms, p99 {pf2['p99_ms']:.2f} ms",
        f"    CPUs kept busy at this pace (of {m['cpus']}): the two instance processes "
        f"{c['cpus_busy']:.2f} (a message: sender {c['sender_cpu_us_per_message']:,.0f} us, "
        f"receiver {c['receiver_cpu_us_per_message']:,.0f} us); the paced floor's one process "
        f"{pf['cpus_busy']:.2f}, on two connections {pf2['cpus_busy']:.2f}",
        "    where the time goes, p50 of each step from the SEND: " + ", ".join(
            f"{title} {c[f'stage_{name}_p50_ms']:+.2f} ms" for name, title in STAGES
            if f"stage_{name}_p50_ms" in c),
        f"(d) {s['large']} bodies of 1 MiB, {s['large_per_transaction']} per transaction: "
        f"{d['mb_per_s']:,.1f} MB/s end to end (target >= {t['mb_per_s']:.0f} MB/s: "
        f"{verdict(d['met'])})",
        f"    local delivery {ld['mb_per_s']:,.1f} MB/s: {d['ratio_local']:.1f}x; raw frames "
        f"{rl['mb_per_s']:,.1f} MB/s: {d['ratio_raw']:.1f}x; CPU per MiB message: sender "
        f"{d['sender_cpu_us_per_message'] / 1e3:,.1f} ms, receiver "
        f"{d['receiver_cpu_us_per_message'] / 1e3:,.1f} ms, local (both) "
        f"{ld['cpu_us_per_message'] / 1e3:,.1f} ms",
        f"(e) (b)'s workload through a forwarder (A -> F -> B, three processes): end to end "
        f"{e['end_to_end_per_s']:,.0f}/s, {e['ratio_direct']:.2f} of (b) direct (target >= "
        f"{t['forwarded_ratio']:.2f}: {verdict(e['met'])})",
        f"    CPU per message: sender {e['sender_cpu_us_per_message']:,.0f} us, receiver "
        f"{e['receiver_cpu_us_per_message']:,.0f} us, forwarder "
        f"{e['forwarder_cpu_us_per_message']:,.0f} us",
        f"    forwarder resident memory: {_mb(e['forwarder_idle_rss_mb'])} after the warm-up, "
        f"peak {_mb(e['forwarder_peak_rss_mb'])}; bound forwarding_size_mb "
        f"{e['forwarding_size_mb']} + {FORWARDER_RSS_ALLOWANCE_MB} = "
        f"{e['forwarder_rss_bound_mb']} MB ("
        + ("not measured: no /proc" if e["memory_met"] is None else verdict(e["memory_met"]))
        + ")",
        f"raw frames, {report['body_bytes']}-byte bodies: {rs['frames_per_s']:,.0f} frames/s, "
        f"{rs['mb_per_s']:,.1f} MB/s",
    ]
    return "\n".join(lines)


# -- the two children -----------------------------------------------------------------------


class WireChild(JsonLinesChild):
    """One wire_child process."""

    module = "pybroker.devtools.bench.wire_child"  # what the process runs (python -m)

    def __init__(self, role: str, folder: Path, retry_scale: float,
                 profile_dir: str | None) -> None:
        self.role = role
        env = dict(os.environ)
        # the children run the same pybroker as this process (a worktree, say)
        root = str(Path(pybroker.__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (root, env.get("PYTHONPATH")) if p)
        if profile_dir:
            env["PYBROKER_BENCH_PROFILE"] = profile_dir
        super().__init__(
            f"the {role} process",
            [sys.executable, "-m", self.module, role,
             str(folder / f"{role}.duckdb"), str(folder), str(retry_scale)],
            folder / f"{role}.stderr", env=env, cwd=root)


class WirePair:
    """The sender and the receiver, trusting each other and routed to each other; and the
    forwarder between them, for FORWARDED_SERVICE only (case e)."""

    def __init__(self, folder: Path, retry_scale: float, profile_dir: str | None) -> None:
        self.folder = folder
        self.children: list[WireChild] = []
        try:
            self.sender = self._start("sender", retry_scale, profile_dir)
            self.receiver = self._start("receiver", retry_scale, profile_dir)
            self.forwarder = self._start("forwarder", retry_scale, profile_dir)
            s, r = self.sender.ask("hello"), self.receiver.ask("hello")
            f = self.forwarder.ask("hello")
            self.pids = {"sender": s["pid"], "receiver": r["pid"], "forwarder": f["pid"]}
            self.sender.ask("peer", name="receiver", pem_file=str(folder / "receiver.pem"),
                            address=r["address"])
            self.receiver.ask("peer", name="sender", pem_file=str(folder / "sender.pem"),
                              address=s["address"])
            self.sender.ask("via", name="forwarder", pem_file=str(folder / "forwarder.pem"),
                            address=f["address"])
            self.receiver.ask("trust", name="forwarder",
                              pem_file=str(folder / "forwarder.pem"))
            self.forwarding_size_mb = self.forwarder.ask(
                "forward", sender_pem=str(folder / "sender.pem"),
                receiver_pem=str(folder / "receiver.pem"), sender_address=s["address"],
                receiver_address=r["address"])["forwarding_size_mb"]
        except BaseException:
            self.close()
            raise

    def _start(self, role: str, retry_scale: float, profile_dir: str | None) -> WireChild:
        child = WireChild(role, self.folder, retry_scale, profile_dir)
        self.children.append(child)
        return child

    def __enter__(self) -> WirePair:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for child in self.children:
            child.stop()

    def warm_up(self) -> None:
        warm = {"messages": 100, "sends_per_transaction": 100}
        self.stream(1, warm)
        self.stream(1, warm, forwarded=True)

    def stream(self, conversations: int, sizes: dict[str, int], *,
               large: bool = False, forwarded: bool = False) -> dict[str, float]:
        total = sizes["large"] if large else sizes["messages"]
        per_tx = sizes["large_per_transaction"] if large else sizes["sends_per_transaction"]
        body_bytes = LARGE_BYTES if large else BODY_BYTES
        self.sender.ask("begin", conversations=conversations, to_service=(
            wire_child.FORWARDED_SERVICE if forwarded else wire_child.TARGET_SERVICE))
        if forwarded:  # its CPU time over the case: from now until both sides answered
            self.forwarder.post("cpu")
            before = self.forwarder.answer()["process_cpu_seconds"]
        self.receiver.post("drain", messages=total, stamped=False)
        self.sender.post("send", messages=total, per_tx=per_tx, body_bytes=body_bytes)
        sent, got = self.sender.answer(), self.receiver.answer()
        figures = _stream_figures(total, body_bytes, sent, got)
        if forwarded:
            self.forwarder.post("cpu")
            spent = self.forwarder.answer()["process_cpu_seconds"] - before
            figures["forwarder_cpu_us_per_message"] = spent / total * 1e6
        return figures

    def paced(self, sizes: dict[str, int]) -> dict[str, float]:
        total = sizes["paced"]
        self.sender.ask("begin", conversations=1)
        self.receiver.post("drain", messages=total, stamped=True)
        self.sender.post("send_paced", messages=total, rate=sizes["rate"],
                         body_bytes=BODY_BYTES)
        sent, got = self.sender.answer(), self.receiver.answer()
        return _paced_figures(total, sent, got)

    def raw(self, total: int, body_bytes: int, rate: int | None = None) -> dict[str, float]:
        port = self.receiver.ask("raw_listen", messages=total, stamped=rate is not None)["port"]
        self.receiver.post("raw_wait")
        self.sender.post("raw_send", port=port, messages=total, body_bytes=body_bytes,
                         per_write=max(1, 2**20 // (body_bytes + 200)), rate=rate)
        sent, got = self.sender.answer(), self.receiver.answer()
        if got["received"] != total:
            raise RuntimeError(f"raw frames: {got['received']} of {total} arrived")
        seconds = got["done"] - sent["start"]
        out = {"messages": total, "delivered": got["received"],
               "frames_per_s": total / seconds,
               "mb_per_s": total * body_bytes / seconds / 1e6}
        if rate is not None:
            out.update(percentiles_ms(got["latencies"]))
        return out


# -- figures ----------------------------------------------------------------------------------


def _stream_figures(total: int, body_bytes: int, sent: dict[str, Any],
                    got: dict[str, Any]) -> dict[str, float]:
    if got["received"] != total:
        raise RuntimeError(f"{got['received']} of {total} messages arrived")
    acked = sent.get("acked", got["done"])
    end = max(acked, got["done"])
    seconds = end - sent["start"]
    return {
        "messages": total,
        "delivered": got["received"],
        "seconds": seconds,
        "end_to_end_per_s": total / seconds,
        "mb_per_s": total * body_bytes / seconds / 1e6,
        "sent_per_s": total / (sent["sent"] - sent["start"]),
        "received_per_s": total / (got["done"] - sent["start"]),
        # the sender's transmission queue empty: every message durably in the receiver's
        # queue (P5.2), whether or not RECEIVEd yet
        "acknowledged_per_s": total / (acked - sent["start"]),
        "receive_transactions": got["transactions"],
        # CPU time of each process (all its threads) per message: what the machine's load
        # does not change much; the local comparison has one process (counted as sender)
        **_cpu(total, sent, got),
    }


def _paced_figures(total: int, sent: dict[str, Any], got: dict[str, Any]) -> dict[str, float]:
    if got["received"] != total or len(got["latencies"]) != total:
        raise RuntimeError(f"{got['received']} of {total} paced messages arrived")
    acked = sent.get("acked", got["done"])
    return {
        "messages": total,
        "delivered": got["received"],
        **percentiles_ms(got["latencies"]),
        "sent_per_s": sent["sent_per_s"],
        "messages_per_transaction": total / sent["transactions"],
        "end_to_end_per_s": total / (max(acked, got["done"]) - sent["start"]),
        **_cpu(total, sent, got),
        **_stages(sent, got),
        **_cpus_busy(sent, got, max(acked, got["done"])),
    }


def _cpus_busy(sent: dict[str, Any], got: dict[str, Any], end: float) -> dict[str, float]:
    """The CPUs a paced case kept busy: its processes' CPU time over its wall time, from
    the first SEND to the end (the local comparison, one process, says nothing apart)."""
    if "cpu_seconds" not in sent:
        return {}
    return {"cpus_busy": (sent["cpu_seconds"] + got["cpu_seconds"])
            / max(1e-9, end - sent["start"])}


STAGES = (  # where a paced message's time goes, in order
    ("send_committed", "SEND committed"),
    ("frame_sent", "frame sent"),
    ("arrival_committed", "arrival committed"),
    ("receive_returned", "RECEIVE returned"),
    ("receive_committed", "RECEIVE committed"),
)


def _stages(sent: dict[str, Any], got: dict[str, Any]) -> dict[str, float]:
    """p50 of each step of a paced message's way, in ms: from its stamp (at SEND) to its
    SEND's commit, then to its frame handed to the connection, its arrival's commit, the
    RECEIVE that returned it and that RECEIVE's commit (stage_<name>_p50_ms). Only the
    two-process case has the middle steps. The SEND's commit hands the frame to the
    transport before the SEND's transaction block returns, so "frame sent" may be a little
    below 0."""
    if "frames_sent" not in sent or "arrivals_committed" not in got:
        return {}
    frame = dict(sent["frames_sent"])
    arrival = dict(got["arrivals_committed"])
    committed = sent["committed"]
    steps: dict[str, list[float]] = {name: [] for name, _ in STAGES}
    for seq, stamp, returned, received in got["timeline"]:
        seq = int(seq)
        times = (stamp, committed[seq], frame.get(seq), arrival.get(seq), returned, received)
        if None in times:
            continue
        for (name, _), before, after in zip(STAGES, times, times[1:], strict=False):
            steps[name].append(after - before)  # type: ignore[operator]
    return {f"stage_{name}_p50_ms": percentiles_ms(values)["p50_ms"]
            for name, values in steps.items() if values}


def _cpu(total: int, sent: dict[str, Any], got: dict[str, Any]) -> dict[str, float]:
    if "cpu_seconds" not in sent:  # the local comparison: both sides in one process
        return {"cpu_us_per_message": sent["process_cpu_seconds"] / total * 1e6}
    out = {"sender_cpu_us_per_message": sent["cpu_seconds"] / total * 1e6,
           "receiver_cpu_us_per_message": got["cpu_seconds"] / total * 1e6}
    for side, reply in (("sender", sent), ("receiver", got)):
        for part, seconds in reply.get("thread_cpu_seconds", {}).items():
            out[f"{side}_cpu_us_{part}"] = seconds / total * 1e6
    return out


def _by_thread(r: dict[str, Any], side: str) -> str:
    """``side``'s CPU per message by wire_child.THREAD_PARTS, if the process said."""
    parts = [*wire_child.THREAD_PARTS.values(), "other"]
    if f"{side}_cpu_us_{parts[0]}" not in r:
        return ""
    return " (" + ", ".join(f"{p} {r[f'{side}_cpu_us_{p}']:,.0f}" for p in parts) + ")"


# -- the comparison inside one instance -----------------------------------------------------


def _with_receiver(target_db: Any, total: int, stamped: bool) -> tuple[
        threading.Thread, dict[str, Any]]:
    got: dict[str, Any] = {}

    def receive() -> None:
        try:
            got.update(wire_child.drain(target_db, wire_child.TARGET_QUEUE, total,
                                        stamped=stamped))
        except BaseException as exc:  # reported by the caller
            got["error"] = exc

    thread = threading.Thread(target=receive, name="bench-local-receiver", daemon=True)
    thread.start()
    return thread, got


def _joined(thread: threading.Thread, got: dict[str, Any]) -> dict[str, Any]:
    thread.join(timeout=600)
    if "error" in got:
        raise RuntimeError(f"local receiver: {got['error']}") from got["error"]
    if thread.is_alive():
        raise RuntimeError("the local receiver did not finish in 600 s")
    return got


def _local_stream(db: Any, target_db: Any, conversations: int, sizes: dict[str, int], *,
                  large: bool = False) -> dict[str, float]:
    total = sizes["large"] if large else sizes["messages"]
    per_tx = sizes["large_per_transaction"] if large else sizes["sends_per_transaction"]
    body_bytes = LARGE_BYTES if large else BODY_BYTES
    convs = wire_child.begin(db, conversations)
    cpu = time.process_time()
    thread, got = _with_receiver(target_db, total, False)
    sent = wire_child.send_stream(db, convs, total, per_tx, os.urandom(body_bytes))
    got = _joined(thread, got)
    sent["process_cpu_seconds"] = time.process_time() - cpu
    return _stream_figures(total, body_bytes, sent, got)


def _local_paced(db: Any, target_db: Any, sizes: dict[str, int]) -> dict[str, float]:
    total = sizes["paced"]
    conv = wire_child.begin(db, 1)[0]
    cpu = time.process_time()
    thread, got = _with_receiver(target_db, total, True)
    sent = wire_child.send_paced(db, conv, total, sizes["rate"], BODY_BYTES)
    got = _joined(thread, got)
    sent["process_cpu_seconds"] = time.process_time() - cpu
    return _paced_figures(total, sent, got)


def _rss_mb(pid: int, field: str = "VmRSS") -> float | None:
    """A process's resident memory (``VmRSS``) or its peak (``VmHWM``), in MB (2^20 bytes),
    from /proc/PID/status; None where there is no /proc."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        return None
    return None


def _mb(value: float | None) -> str:
    return "unknown" if value is None else f"{value:,.1f} MB"

