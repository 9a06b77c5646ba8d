"""The workers shape of ``pybroker bench messaging`` (C7, conversation group locks): N
worker threads of one process, each in a loop of one transaction that RECEIVEs one
message, processes it (a sleep of ``processing`` seconds, standing in for the
application's work) and COMMITs, over ``conversations`` conversations whose messages were
sent before; messages/s handled, and the speed-up over one worker in the same run.
Transactions on different groups run side by side, so N workers should approach N times
one worker while the processing dominates. The writers' shape (``reply``) is the same
with a SEND of a reply on the message's conversation inside each transaction, before its
processing: a writing transaction's processing holds no instance-wide lock either."""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pybroker
from pybroker.api.instance import Instance
from pybroker.devtools.bench.objects import initiator_and_target

WORKERS = (1, 4, 8)
ACTIVATION_TARGET = 3.5  # MAX_QUEUE_READERS 4 against 1 (issue 45)


def run_case(workers: int, sizes: dict[str, Any], body: bytes, *,
             reply: bool = False) -> dict[str, Any]:
    """One run with ``workers`` threads, on an instance of its own; ``sizes``: the bench's,
    with workers_messages, workers_conversations and workers_processing (seconds);
    ``reply``: the writers' shape (see work)."""
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
        result = work([target] * workers, "TargetQueue", processing, reply=reply)
    return {"workers": workers, **result}


def work(dbs: list[Any], queue: str, processing: float, *,
         reply: bool = False) -> dict[str, float]:
    """One worker thread per database object of ``dbs`` (the same one embedded, a client
    connection each when served), each in a loop of one transaction that receives one
    message from ``queue`` (``reply``: and SENDs a reply on its conversation), waits
    ``processing`` seconds and commits, until the queue is empty: how many were handled,
    in how long."""
    handled: list[int] = []
    pause = threading.Event()  # never set: its wait is the processing

    def worker(db: Any) -> None:
        count = 0
        while True:
            with db.transaction():
                got = db.receive(queue, max_messages=1)
                if not got:
                    break
                if reply:
                    db.conversation(got[0].conversation_handle).send(b"done")
                pause.wait(processing)
            count += 1
        handled.append(count)

    threads = [threading.Thread(target=worker, args=(db,), daemon=True) for db in dbs]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - start
    return {"handled": sum(handled), "seconds": elapsed,
            "handled_per_s": sum(handled) / elapsed if elapsed else 0.0}


def run_served(path: Path, database: str, initiator: str, target: str, queue: str,
               sizes: dict[str, Any], *, reply: bool = False) -> list[dict[str, Any]]:
    """The workers shape through a served instance (``pybroker serve`` holds ``path``):
    each worker a client connection of its own, in threads of this process; ``reply``:
    the writers' shape (see work)."""
    body = os.urandom(256)
    messages = int(sizes["workers_messages"])
    conversations = int(sizes["workers_conversations"])
    cases = []
    for workers in WORKERS:
        with contextlib.ExitStack() as stack:
            loader = stack.enter_context(pybroker.connect(path)).database(database)
            with loader.transaction():
                convs = [loader.begin_dialog(initiator, target) for _ in range(conversations)]
            with loader.transaction():
                for i in range(messages):
                    convs[i % conversations].send(body)
            dbs = [stack.enter_context(pybroker.connect(path)).database(database)
                   for _ in range(workers)]
            cases.append({"workers": workers, **work(
                dbs, queue, float(sizes["workers_processing"]), reply=reply)})
    return _speedups(cases, sizes, reply=reply)


def run(sizes: dict[str, Any], *, reply: bool = False) -> list[dict[str, Any]]:
    body = os.urandom(256)
    return _speedups([run_case(n, sizes, body, reply=reply) for n in WORKERS], sizes,
                     reply=reply)


# -- the activation case: readers of an activated queue as the workers -------------------

ACTIVATED_QUEUE = "WorkersQueue"
PROCEDURE = "pybroker.devtools.bench.workers:process_one_at_a_time"
CHECK_INTERVAL = 0.1  # seconds between the queue monitor's checks in this case
READER_WAIT = 0.2  # seconds a reader's RECEIVE waits before the reader returns
READERS = (1, 4)  # MAX_QUEUE_READERS
_lock = threading.Lock()
_handled = 0
_running = 0
_peak = 0
_processing = 0.0


def process_one_at_a_time(db: Any) -> None:
    """The activation procedure of the case: the workers' loop (one message a
    transaction, processed for the case's time before COMMIT) until the queue stays empty
    for READER_WAIT seconds."""
    global _handled, _running, _peak
    pause = threading.Event()  # never set: its wait is the processing
    with _lock:
        _running += 1
        _peak = max(_peak, _running)
    try:
        while True:
            with db.transaction():
                if not db.receive(ACTIVATED_QUEUE, max_messages=1, timeout=READER_WAIT):
                    return
                pause.wait(_processing)
            with _lock:
                _handled += 1
    finally:
        with _lock:
            _running -= 1


def run_activation_case(readers: int, sizes: dict[str, Any], body: bytes) -> dict[str, Any]:
    """The workers shape with activation's readers as the workers: a queue WITH
    ACTIVATION (MAX_QUEUE_READERS ``readers``) whose procedure is
    process_one_at_a_time; the messages are sent in one transaction while activation
    runs, and timed from that commit until the readers have handled them all."""
    global _handled, _peak, _processing
    messages = int(sizes["workers_messages"])
    conversations = int(sizes["workers_conversations"])
    with _lock:
        _handled, _peak = 0, _running
        _processing = float(sizes["workers_processing"])
    with (
        tempfile.TemporaryDirectory(prefix="pybroker-bench-") as tmp,
        Instance(Path(tmp) / "activated.duckdb", worker=False) as inst,
    ):
        initiator, _ = initiator_and_target(
            inst, ACTIVATED_QUEUE, activation_procedure=PROCEDURE, max_queue_readers=readers)
        with initiator.transaction():
            convs = [initiator.begin_dialog("InitiatorService", "TargetService")
                     for _ in range(conversations)]
        inst.start_activation(check_interval=CHECK_INTERVAL, close_timeout=10.0)
        done = threading.Event()
        deadline = time.monotonic() + 120 + messages * _processing
        start = time.perf_counter()
        with initiator.transaction():
            for i in range(messages):
                convs[i % conversations].send(body)
        while _handled < messages:
            if time.monotonic() > deadline:
                raise RuntimeError("workers' activation case: the readers did not handle "
                                   f"{messages} messages in time ({_handled} handled)")
            done.wait(0.001)  # a poll of the readers' count, never set
        elapsed = time.perf_counter() - start
        peak = _peak
    return {"workers": readers, "handled": messages, "seconds": elapsed,
            "handled_per_s": messages / elapsed if elapsed else 0.0, "readers_at_most": peak}


def run_activation(sizes: dict[str, Any]) -> list[dict[str, Any]]:
    body = os.urandom(256)
    return _speedups([run_activation_case(n, sizes, body) for n in READERS], sizes)


def _speedups(cases: list[dict[str, Any]], sizes: dict[str, Any], *,
              reply: bool = False) -> list[dict[str, Any]]:
    one = cases[0]["handled_per_s"] or 1.0
    for case in cases:
        case["reply"] = reply
        case["speedup"] = case["handled_per_s"] / one
        case["messages"] = int(sizes["workers_messages"])
        case["conversations"] = int(sizes["workers_conversations"])
        case["processing"] = float(sizes["workers_processing"])
    return cases


def format_cases(cases: list[dict[str, Any]], how: str = "threads of one process"
                 ) -> list[str]:
    if not cases:
        return []
    c = cases[0]
    verb = "RECEIVE of one message and SEND of a reply" if c.get("reply") else (
        "RECEIVE of one message")
    lines = [f"workers (C7): each {verb}, {c['processing'] * 1000:.0f} ms of "
             f"processing, COMMIT; {c['messages']} messages over {c['conversations']} "
             f"conversations, {how}"]
    lines += [f"    {case['workers']} worker{'s' if case['workers'] > 1 else ''}: "
              f"{case['handled_per_s']:,.1f} messages/s ({case['speedup']:.2f}x one worker)"
              for case in cases]
    return lines


def format_activation_cases(cases: list[dict[str, Any]]) -> list[str]:
    """The activation case beside the threads' (target: 4 readers >= 3.5x one)."""
    if not cases:
        return []
    c = cases[0]
    lines = [f"workers as activation's readers (C7, C8): each RECEIVE of one message, "
             f"{c['processing'] * 1000:.0f} ms of processing, COMMIT; {c['messages']} messages "
             f"over {c['conversations']} conversations sent while activation runs"]
    for case in cases:
        target = ("" if case["workers"] == 1 else
                  f"; target >= {ACTIVATION_TARGET}x: "
                  + ("met" if case["speedup"] >= ACTIVATION_TARGET else "not met"))
        lines.append(f"    MAX_QUEUE_READERS {case['workers']}: {case['handled_per_s']:,.1f} "
                     f"messages/s ({case['speedup']:.2f}x one reader; "
                     f"{case['readers_at_most']} at most at once{target})")
    return lines
