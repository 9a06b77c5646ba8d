"""The bystander case of ``pybroker bench messaging`` (C7): while one transaction holds a
conversation group open after its RECEIVE (a worker processing slowly), another thread
begins dialogs and sends to another service's queue, one transaction each; their latency
(BEGIN DIALOG + SEND + COMMIT), p50 and p99, against issue 45's p99 target of 50 ms. With
group locks nothing of the held transaction stands in the bystander's way."""

from __future__ import annotations

import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from pybroker.api.instance import Instance
from pybroker.devtools.bench.figures import percentiles_ms
from pybroker.devtools.bench.objects import initiator_and_target

TARGET_P99_MS = 50.0
HOLD_LIMIT = 120.0  # seconds the holder waits for the bystander at most


def run(sends: int) -> dict[str, Any]:
    """``sends`` bystander transactions while another transaction holds its group."""
    body = os.urandom(256)
    with (
        tempfile.TemporaryDirectory(prefix="pybroker-bench-") as tmp,
        Instance(Path(tmp) / "bystander.duckdb", worker=False) as inst,
    ):
        initiator, target = initiator_and_target(inst)
        target.create_queue("OtherQueue")
        target.create_service("OtherService", queue="OtherQueue", contracts=["DEFAULT"])
        initiator.begin_dialog("InitiatorService", "TargetService").send(body)
        held, done = threading.Event(), threading.Event()
        holder_received: list[int] = []

        def holder() -> None:
            with target.transaction():
                holder_received.append(len(target.receive("TargetQueue", max_messages=1)))
                held.set()
                done.wait(HOLD_LIMIT)  # the worker's slow processing, inside its transaction

        thread = threading.Thread(target=holder, daemon=True)
        thread.start()
        if not held.wait(HOLD_LIMIT):
            raise RuntimeError("the holding transaction never received its message")
        latencies = []
        try:
            for _ in range(sends):
                started = time.perf_counter()
                with initiator.transaction():
                    initiator.begin_dialog("InitiatorService", "OtherService").send(body)
                latencies.append(time.perf_counter() - started)
        finally:
            done.set()
            thread.join()
        delivered = inst.sql("SELECT count(*) FROM sys.queue_messages "
                             "WHERE queue_name = 'OtherQueue'").fetchone()[0]
    return {"sends": sends, "held_received": holder_received[0], "delivered": delivered,
            **percentiles_ms(latencies), "target_p99_ms": TARGET_P99_MS}


def format_case(case: dict[str, Any] | None) -> list[str]:
    if not case:
        return []
    verdict = "met" if case["p99_ms"] <= case["target_p99_ms"] else "NOT met"
    return [f"bystander (C7): {case['sends']} transactions of BEGIN DIALOG + SEND to another "
            f"queue while one transaction holds its group after RECEIVE: p50 "
            f"{case['p50_ms']:.2f} ms, p99 {case['p99_ms']:.2f} ms (target <= "
            f"{case['target_p99_ms']:.0f} ms: {verdict}); {case['delivered']} delivered"]
