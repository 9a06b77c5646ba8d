"""``pybroker bench wire --body-mb N``: one large body between two instance processes, and
what it costs each side in memory.

The same two children as ``pybroker bench wire`` (``big_body_child``: a wire_child with a
few more commands), mutual TLS 1.3 on 127.0.0.1, routes both ways, warmed up by 100 small
messages. Per run the sender makes a body of N MB (10^6 bytes, random), then each side
takes its baseline: its resident set just before the send, with the kernel's peak
(VmHWM) reset to it (``/proc/self/clear_refs``). The sender SENDs the body in one
transaction and waits until its transmission queue is empty (the receiver committed it,
P5.2); the receiver RECEIVEs it and checks its SHA-256 against the sender's. Each side's
growth is its peak resident set since the baseline, less the baseline: what carrying the
body cost that process, the sender's own copy of the body (made before the baseline) not
counted, the body RECEIVE returns counted (1x of it cannot be avoided). The comparison is
the body's own size: growth / body.

The storage floor, in the same run (``big_body_floor``): the same body kept by a bare
DuckDB file under the memory limit an instance sets for a body bound whole (the default
and three times the body), each way in a fresh process: whole, as pybroker stored a large
body before it kept one as pieces; in 1 MiB parts in one transaction, as an atomic SEND of
parts would; in 1 MiB parts each committed on its own and read back part by part, as the
sender commits its pieces apart before the SEND's row; and as the receiver keeps a
message's fragments (pieces under DuckDB's block size, committed 1 MiB at a time, in a
table with a key, read back through it, under the default memory limit: the key's cost
is in this floor, see big_body_floor). Each side's growth is set beside the floor of its
path.

Figures are the median of ``repeat`` runs in the same two processes.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from pybroker.devtools.bench import big_body_floor, wire
from pybroker.devtools.bench.figures import machine, machine_load, median_of
from pybroker.kernel.messaging.message_parts import PIECE_SIZE

TARGET_RATIO = 2.0  # peak RSS growth of each side, in bodies


class _Child(wire.WireChild):
    """One big_body_child process (a wire_child that also sends and takes one big body)."""

    module = "pybroker.devtools.bench.big_body_child"


class _Pair(wire.WirePair):
    def _start(self, role: str, retry_scale: float, profile_dir: str | None) -> _Child:
        child = _Child(role, self.folder, retry_scale, profile_dir)
        self.children.append(child)
        return child

    def big(self, size: int) -> dict[str, float]:
        self.sender.ask("begin", conversations=1)
        made = self.sender.ask("big_make", body_bytes=size)
        self.receiver.ask("big_baseline")
        self.sender.ask("big_baseline")
        self.receiver.post("big_receive")
        self.sender.post("big_send")
        sent, got = self.sender.answer(), self.receiver.answer()
        if got["size"] != size or got["sha256"] != made["sha256"]:
            raise RuntimeError(f"the body arrived as {got['size']} bytes, SHA-256 "
                               f"{got['sha256']}; {size} bytes, {made['sha256']} were sent")
        seconds = max(sent["acked"], got["done"]) - sent["start"]
        return {
            "body_mb": size / 1e6,
            "seconds": seconds,
            "mb_per_s": size / seconds / 1e6,
            "sender_growth_mb": sent["growth"] / 1e6,
            "receiver_growth_mb": got["growth"] / 1e6,
            "sender_ratio": sent["growth"] / size,
            "receiver_ratio": got["growth"] / size,
            "sender_baseline_mb": sent["baseline"] / 1e6,
            "receiver_baseline_mb": got["baseline"] / 1e6,
            "sender_duckdb_mb": sent["duckdb_memory"] / 1e6,
            "receiver_duckdb_mb": got["duckdb_memory"] / 1e6,
        }


def run(*, body_mb: float, repeat: int = 3, retry_scale: float = 1.0) -> dict[str, Any]:
    size = int(body_mb * 1e6)
    if size < 1:
        raise ValueError("the body must have at least one byte")
    runs: list[dict[str, float]] = []
    load_before = machine_load()
    with tempfile.TemporaryDirectory(prefix="pybroker-bench-body-") as tmp, \
            _Pair(Path(tmp), retry_scale, None) as pair:
        pair.warm_up()
        for _ in range(repeat):
            runs.append(pair.big(size))
        floor = big_body_floor.run_children(Path(tmp), size)
    report: dict[str, Any] = {
        "machine": machine(),
        "load": {"before": load_before, "after": machine_load()},
        "body_bytes": size,
        "repeat": repeat,
        "target_ratio": TARGET_RATIO,
        "big_body": median_of(runs),
    }
    r = report["big_body"]
    r["met"] = max(r["sender_ratio"], r["receiver_ratio"]) <= TARGET_RATIO
    report["floor"] = {way: {"stored_ratio": f["stored"] / size,
                             "read_back_ratio": f["read_back"] / size,
                             "memory_limit_mb": f["memory_limit"] / 1e6}
                       for way, f in floor.items()}
    return report


def format_report(report: dict[str, Any]) -> str:
    m, r = report["machine"], report["big_body"]
    return "\n".join([
        f"machine: {m['cpus']} CPUs, {m['platform']}, Python {m['python']}, "
        f"DuckDB {m['duckdb']}; load average (1, 5, 15 min) before "
        f"{report['load']['before']}, after {report['load']['after']}",
        f"(e) one body of {r['body_mb']:,.0f} MB between two instance processes over mutual "
        f"TLS 1.3, durable end to end; median of {report['repeat']} runs",
        f"    {r['seconds']:.1f} s SEND to RECEIVE and acknowledgement ({r['mb_per_s']:,.1f} "
        f"MB/s)",
        f"    peak RSS growth: sender +{r['sender_growth_mb']:,.0f} MB "
        f"({r['sender_ratio']:.2f}x the body), receiver +{r['receiver_growth_mb']:,.0f} MB "
        f"({r['receiver_ratio']:.2f}x; RECEIVE's own copy is 1x) (target <= "
        f"{report['target_ratio']:.0f}x: {'met' if r['met'] else 'MISSED'})",
        f"    baselines: sender {r['sender_baseline_mb']:,.0f} MB (its own body included), "
        f"receiver {r['receiver_baseline_mb']:,.0f} MB; DuckDB's memory afterwards "
        f"(duckdb_memory()): sender {r['sender_duckdb_mb']:,.0f} MB, receiver "
        f"{r['receiver_duckdb_mb']:,.0f} MB",
        _floor_line(report),
    ])


def _floor_line(report: dict[str, Any]) -> str:
    f = report["floor"]
    whole, send, parts, pieces = f["whole"], f["send"], f["parts"], f["pieces"]
    return (
        f"    storage floor (a bare DuckDB file, memory limit "
        f"{whole['memory_limit_mb']:,.0f} MB, as an instance sets it for this body bound "
        f"whole): whole, "
        f"one transaction: stored {whole['stored_ratio']:.2f}x, read back "
        f"{whole['read_back_ratio']:.2f}x; 1 MiB parts in one transaction (an atomic "
        f"SEND): {send['stored_ratio']:.2f}x, {send['read_back_ratio']:.2f}x; 1 MiB parts "
        f"committed one by one, read back part by part: {parts['stored_ratio']:.2f}x, "
        f"{parts['read_back_ratio']:.2f}x; as the receiver keeps fragments (pieces of "
        f"{PIECE_SIZE // 1024} KiB, 1 MiB committed at a time, a key, memory limit "
        f"{pieces['memory_limit_mb']:,.0f} MB): {pieces['stored_ratio']:.2f}x, "
        f"{pieces['read_back_ratio']:.2f}x")
