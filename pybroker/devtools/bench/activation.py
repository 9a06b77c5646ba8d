"""The activation case of ``pybroker bench messaging`` (C3): messages handled per second by
an activated queue's readers (MAX_QUEUE_READERS 1 and 4), and the time from a message's
commit to the start of the reader it activates.

The queue's callable is :func:`drain` below: it receives in batches, each batch in its own
transaction, until a RECEIVE waits ``WAIT`` seconds in vain. The monitors check every
``CHECK_INTERVAL`` seconds (SQL Server's few seconds would leave a short run with one
reader). Readers run side by side on different conversation groups (C7), but with no
processing time their work is the writes of their commits, which share one connection:
the figure says what more readers buy there, not what more cores would (the workers case,
workers.py, is the one with processing time).
"""

from __future__ import annotations

import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from pybroker.api.database import Database
from pybroker.api.instance import Instance
from pybroker.devtools.bench.objects import initiator_and_target

CHECK_INTERVAL = 0.1  # seconds between the monitors' checks in this case
WAIT = 0.2  # seconds a reader's RECEIVE waits before the reader returns
QUEUE = "ActivatedQueue"
PROCEDURE = "pybroker.devtools.bench.activation:drain"
LATENCY_SAMPLES = 10

_lock = threading.Lock()
_handled = 0
_running = 0  # readers in drain() now
_peak = 0  # the most readers in drain() at once since the last reset
_started: list[float] = []  # perf_counter() at each reader's start
_max_messages = 1_000


def drain(db: Database) -> None:
    """The activation procedure: receive until the queue stays empty for WAIT seconds."""
    global _handled, _running, _peak
    with _lock:
        _started.append(time.perf_counter())
        _running += 1
        _peak = max(_peak, _running)
    try:
        while True:
            with db.transaction():
                got = db.receive(QUEUE, max_messages=_max_messages, timeout=WAIT)
            if not got:
                return
            with _lock:
                _handled += len(got)
    finally:
        with _lock:
            _running -= 1


def _reset(max_messages: int) -> None:
    global _handled, _max_messages, _peak
    with _lock:
        _handled = 0
        _peak = _running
        _started.clear()
        _max_messages = max_messages


def _wait(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"activation case: timed out waiting for {what}")
        time.sleep(0.001)


def run_case(sizes: dict[str, int], body: bytes, readers: int) -> dict[str, float]:
    """One instance, an activated queue with ``readers`` readers at most: the time from a
    commit to its reader's start (the queue idle before), then ``sizes['messages']``
    messages sent over ``sizes['conversations']`` conversations and handled."""
    total, per_tx = sizes["messages"], sizes["sends_per_transaction"]
    _reset(sizes["max_messages"])
    with (
        tempfile.TemporaryDirectory(prefix="pybroker-bench-") as tmp,
        Instance(Path(tmp) / "activation.duckdb", worker=False) as inst,
    ):
        initiator, _ = initiator_and_target(
            inst, QUEUE, activation_procedure=PROCEDURE, max_queue_readers=readers)
        inst.start_activation(check_interval=CHECK_INTERVAL, close_timeout=5.0)
        clock = time.perf_counter
        conv = initiator.begin_dialog("InitiatorService", "TargetService")
        latencies = []
        for i in range(LATENCY_SAMPLES):
            _wait(lambda: _running == 0, 30, "readers to return")
            before = clock()
            conv.send(body)  # commits: the arrival
            _wait(lambda i=i: len(_started) > i, 30, "a reader to start")
            latencies.append(_started[i] - before)
        _wait(lambda: _handled == LATENCY_SAMPLES, 30, "the latency messages")
        _reset(sizes["max_messages"])
        with initiator.transaction():
            convs = [initiator.begin_dialog("InitiatorService", "TargetService")
                     for _ in range(sizes["conversations"])]
        start = clock()
        for first in range(0, total, per_tx):
            with initiator.transaction():
                for i in range(first, min(total, first + per_tx)):
                    convs[i % len(convs)].send(body)
        _wait(lambda: _handled >= total, 600, f"{total} messages to be handled")
        done = clock()
        peak = _peak
    latencies.sort()
    return {
        "readers": readers,
        "messages": total,
        "handled_per_s": total / (done - start),
        "readers_at_most": peak,
        "activation_p50_ms": latencies[len(latencies) // 2] * 1e3,
        "activation_max_ms": latencies[-1] * 1e3,
    }


def format_case(r: dict[str, Any]) -> str:
    return (f"activation, MAX_QUEUE_READERS {r['readers']}: {r['messages']:,} messages "
            f"handled {r['handled_per_s']:,.0f}/s, {r['readers_at_most']} reader(s) at most "
            f"at once; commit to reader start p50 {r['activation_p50_ms']:.1f} ms, max "
            f"{r['activation_max_ms']:.1f} ms (checks every {CHECK_INTERVAL} s, "
            f"{LATENCY_SAMPLES} samples)")
