"""The workers shape of ``pybroker bench messaging`` (C7, conversation group locks): N
worker threads of one process, each in a loop of one transaction that RECEIVEs one
message, processes it (a sleep of ``processing`` seconds, standing in for the
application's work) and COMMITs, over ``conversations`` conversations whose messages were
sent before; messages/s handled, and the speed-up over one worker in the same run.
Transactions on different groups run side by side, so N workers should approach N times
one worker while the processing dominates."""

from __future__ import annotations

import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from pybroker.api.instance import Instance
from pybroker.devtools.bench.objects import initiator_and_target

WORKERS = (1, 4, 8)


def run_case(workers: int, sizes: dict[str, Any], body: bytes) -> dict[str, Any]:
    """One run with ``workers`` threads, on an instance of its own; ``sizes``: the bench's,
    with workers_messages, workers_conversations and workers_processing (seconds)."""
    messages = int(sizes["workers_messages"])
    conversations = int(sizes["workers_conversations"])
    processing = float(sizes["workers_processing"])
    with (
        tempfile.TemporaryDirectory(prefix="pybroker-bench-") as tmp,
        Instance(Path(tmp) / "workers.duckdb", worker=False) as inst,
    ):
        initiator, target = initiator_and_target(inst)
        convs = [initiator.begin_dialog("InitiatorService", "TargetService")
                 for _ in range(conversations)]
        with initiator.transaction():
            for i in range(messages):
                convs[i % conversations].send(body)
        handled: list[int] = []
        stop = threading.Event()
        pause = threading.Event()  # never set: its wait is the processing

        def worker() -> None:
            count = 0
            while not stop.is_set():
                with target.transaction():
                    got = target.receive("TargetQueue", max_messages=1)
                    if not got:
                        break
                    pause.wait(processing)
                count += 1
            handled.append(count)

        threads = [threading.Thread(target=worker, daemon=True) for _ in range(workers)]
        start = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - start
        stop.set()
    return {"workers": workers, "handled": sum(handled), "seconds": elapsed,
            "handled_per_s": sum(handled) / elapsed if elapsed else 0.0}


def run(sizes: dict[str, Any]) -> list[dict[str, Any]]:
    body = os.urandom(256)
    cases = [run_case(n, sizes, body) for n in WORKERS]
    one = cases[0]["handled_per_s"] or 1.0
    for case in cases:
        case["speedup"] = case["handled_per_s"] / one
        case["messages"] = int(sizes["workers_messages"])
        case["conversations"] = int(sizes["workers_conversations"])
        case["processing"] = float(sizes["workers_processing"])
    return cases


def format_cases(cases: list[dict[str, Any]]) -> list[str]:
    if not cases:
        return []
    c = cases[0]
    lines = [f"workers (C7): each RECEIVE of one message, {c['processing'] * 1000:.0f} ms of "
             f"processing, COMMIT; {c['messages']} messages over {c['conversations']} "
             "conversations, threads of one process"]
    lines += [f"    {case['workers']} worker{'s' if case['workers'] > 1 else ''}: "
              f"{case['handled_per_s']:,.1f} messages/s ({case['speedup']:.2f}x one worker)"
              for case in cases]
    return lines
