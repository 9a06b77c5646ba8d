"""``pybroker bench messaging``: the messaging targets of issue 3, measured.

Local durable SEND -> RECEIVE on a file-backed instance (a temporary directory), 256-byte
bodies, the initiator service in one database and the target service in another:

- (a) one conversation and (b) 1,000 conversations (20 messages each, sent round robin, so
  each conversation's messages lie spread over the whole queue): many sends per
  transaction, then batched RECEIVE (``max_messages`` 1,000, many receives per
  transaction); messages/s sent, received and end to end (sent and received, over the
  time of both), against the target of 20,000 messages/s end to end;
- one message per transaction: SEND and RECEIVE throughput, and the latency of one
  ``receive()`` in its own transaction (p50/p99);
- the latency of one batched ``receive()`` call inside a transaction (p50/p99);
- comparison, measured in the same run: the storage floor, the same rows put into a bare
  table of queue_messages' columns with one INSERT ... SELECT per send transaction and
  taken out with one DELETE ... RETURNING per receive transaction (no endpoints, no
  routing, no column encoding); ratio = floor throughput / pybroker throughput.

Each figure is the median of ``repeat`` runs in one process. The instance runs without
its background worker (nothing in the workload is due; it would only add noise).
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

from pybroker.bench.routing import _machine, _median_of
from pybroker.instance import Database, Instance, connect

BODY_BYTES = 256
FULL = {"messages": 20_000, "conversations": 1_000, "sends_per_transaction": 1_000,
        "max_messages": 1_000, "receives_per_transaction": 50, "single": 200}
QUICK = {"messages": 2_000, "conversations": 100, "sends_per_transaction": 500,
         "max_messages": 1_000, "receives_per_transaction": 50, "single": 20}
TARGETS = {"end_to_end_per_s": 20_000.0}


def run(*, repeat: int = 5, quick: bool = False,
        sizes: dict[str, int] | None = None) -> dict[str, Any]:
    """Run the benchmark; ``sizes`` overrides FULL/QUICK (tests pass tiny ones)."""
    sizes = dict(sizes or (QUICK if quick else FULL))
    body = os.urandom(BODY_BYTES)
    with (
        tempfile.TemporaryDirectory(prefix="pybroker-bench-") as tmp,
        connect(Path(tmp) / "bench.duckdb", worker=False) as inst,
    ):
        initiator, target = _build(inst)
        inst._store.run("bench/create_messaging_floor.sql")
        one, many, single, floor_one, floor_many = [], [], [], [], []
        for _ in range(repeat):
            one.append(_stream(initiator, target, 1, sizes, body))
            many.append(_stream(initiator, target, sizes["conversations"], sizes, body))
            single.append(_single(initiator, target, sizes["single"], body))
            floor_one.append(_floor(inst, 1, sizes, body))
            floor_many.append(_floor(inst, sizes["conversations"], sizes, body))
    report = {
        "machine": _machine(),
        "sizes": sizes,
        "body_bytes": BODY_BYTES,
        "repeat": repeat,
        "one_conversation": _median_of(one),
        "many_conversations": _median_of(many),
        "one_per_transaction": _median_of(single),
        "floor_one_conversation": _median_of(floor_one),
        "floor_many_conversations": _median_of(floor_many),
        "targets": TARGETS,
    }
    for name in ("one_conversation", "many_conversations"):
        floor = report[f"floor_{name}"]
        report[name]["ratio_floor"] = floor["end_to_end_per_s"] / report[name][
            "end_to_end_per_s"]
    return report


def format_report(report: dict[str, Any]) -> str:
    m, s, t = report["machine"], report["sizes"], report["targets"]
    target = t["end_to_end_per_s"]
    lines = [
        f"machine: {m['cpus']} CPUs, {m['platform']}, Python {m['python']}, "
        f"DuckDB {m['duckdb']}",
        f"local durable SEND -> RECEIVE, file-backed, {report['body_bytes']}-byte bodies, two "
        f"databases; {s['messages']:,} messages per case, {s['sends_per_transaction']:,} "
        f"sends per transaction, receive(max_messages={s['max_messages']:,}) x "
        f"{s['receives_per_transaction']} per transaction; median of {report['repeat']} runs",
        "",
    ]
    for name, title in (("one_conversation", "(a) 1 conversation"),
                        ("many_conversations", f"(b) {s['conversations']:,} conversations")):
        r, f = report[name], report[f"floor_{name}"]
        verdict = "met" if r["end_to_end_per_s"] >= target else "MISSED"
        lines += [
            f"{title}: sent {r['sent_per_s']:,.0f}/s, received {r['received_per_s']:,.0f}/s, "
            f"end to end {r['end_to_end_per_s']:,.0f}/s (target >= {target:,.0f}/s: "
            f"{verdict}); {r['messages_per_receive']:,.1f} messages per receive()",
            f"    storage floor (bare table, INSERT ... SELECT / DELETE ... RETURNING): "
            f"{f['inserted_per_s']:,.0f}/s in, {f['deleted_per_s']:,.0f}/s out, "
            f"{f['end_to_end_per_s']:,.0f}/s end to end; floor/pybroker "
            f"{r['ratio_floor']:.1f}x",
            f"    batched receive() call: p50 {r['receive_p50_ms']:.3f} ms, p99 "
            f"{r['receive_p99_ms']:.3f} ms",
        ]
    o = report["one_per_transaction"]
    lines += [
        f"one message per transaction ({s['single']} each): send {o['send_per_s']:,.0f}/s "
        f"(p50 {o['send_p50_ms']:.2f} ms), receive {o['receive_per_s']:,.0f}/s; receive() in "
        f"its own transaction p50 {o['receive_p50_ms']:.2f} ms, p99 "
        f"{o['receive_p99_ms']:.2f} ms",
    ]
    return "\n".join(lines)


# -- workload ------------------------------------------------------------------------------


def _build(inst: Instance) -> tuple[Database, Database]:
    initiator = inst.create_database("BenchInitiator")
    target = inst.create_database("BenchTarget")
    initiator.create_queue("InitiatorQueue")
    initiator.create_service("InitiatorService", queue="InitiatorQueue")
    target.create_queue("TargetQueue")
    target.create_service("TargetService", queue="TargetQueue", contracts=["DEFAULT"])
    return initiator, target


def _percentiles_ms(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p50 = ordered[len(ordered) // 2]
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return p50 * 1e3, p99 * 1e3


def _stream(initiator: Database, target: Database, conversations: int,
            sizes: dict[str, int], body: bytes) -> dict[str, float]:
    """Send every message (round robin over the conversations), then receive them all."""
    total, per_tx = sizes["messages"], sizes["sends_per_transaction"]
    with initiator.transaction():
        convs = [initiator.begin_dialog("InitiatorService", "TargetService")
                 for _ in range(conversations)]
    clock = time.perf_counter
    start = clock()
    sent = 0
    while sent < total:
        with initiator.transaction():
            for i in range(sent, min(total, sent + per_tx)):
                convs[i % conversations].send(body)
        sent = min(total, sent + per_tx)
    sent_at = clock()
    received, calls, samples = 0, 0, []
    last_seen: dict[str, int] = {}
    while received < total:
        with target.transaction():
            for _ in range(sizes["receives_per_transaction"]):
                before = clock()
                got = target.receive("TargetQueue", max_messages=sizes["max_messages"])
                samples.append(clock() - before)
                if not got:
                    break
                calls += 1
                received += len(got)
                for m in got:  # P3.1: in order, exactly once
                    if m.message_sequence_number != last_seen.get(m.conversation_handle, -1) + 1:
                        raise RuntimeError(f"message {m.message_sequence_number} of "
                                           f"{m.conversation_handle} out of order")
                    last_seen[m.conversation_handle] = m.message_sequence_number
        if received < total and not got:
            raise RuntimeError(f"received {received} of {total} messages")
    done = clock()
    if received != total:
        raise RuntimeError(f"received {received} messages, sent {total}")
    p50, p99 = _percentiles_ms(samples)
    return {
        "messages": total,
        "send_seconds": sent_at - start,
        "receive_seconds": done - sent_at,
        "sent_per_s": total / (sent_at - start),
        "received_per_s": total / (done - sent_at),
        "end_to_end_per_s": total / (done - start),
        "messages_per_receive": received / calls,
        "receive_p50_ms": p50,
        "receive_p99_ms": p99,
    }


def _single(initiator: Database, target: Database, count: int,
            body: bytes) -> dict[str, float]:
    """One SEND per transaction, then one RECEIVE per transaction (each call its own)."""
    conv = initiator.begin_dialog("InitiatorService", "TargetService")
    clock = time.perf_counter
    sends, receives = [], []
    for _ in range(count):
        before = clock()
        conv.send(body)
        sends.append(clock() - before)
    for _ in range(count):
        before = clock()
        got = target.receive("TargetQueue")
        receives.append(clock() - before)
        if len(got) != 1:
            raise RuntimeError(f"receive() returned {len(got)} messages, expected 1")
    send_p50, _ = _percentiles_ms(sends)
    p50, p99 = _percentiles_ms(receives)
    return {
        "send_per_s": count / sum(sends),
        "receive_per_s": count / sum(receives),
        "send_p50_ms": send_p50,
        "receive_p50_ms": p50,
        "receive_p99_ms": p99,
    }


def _floor(inst: Instance, conversations: int, sizes: dict[str, int],
           body: bytes) -> dict[str, float]:
    """The same rows through a bare table: one statement per transaction each way."""
    store = inst._store
    total, per_tx = sizes["messages"], sizes["sends_per_transaction"]
    rows_per_receive_tx = min(total, sizes["max_messages"] * sizes["receives_per_transaction"],
                              max(1, total // conversations) * sizes[
                                  "receives_per_transaction"])
    now = inst._now()
    clock = time.perf_counter
    start = clock()
    for first in range(0, total, per_tx):
        with store.transaction():
            store.run("bench/insert_messaging_floor.sql", {
                "first": first, "last": min(total, first + per_tx),
                "conversations": conversations, "body": body, "now": now})
    inserted_at = clock()
    out = 0
    while out < total:
        with store.transaction():
            got = store.run("bench/delete_messaging_floor.sql", {"rows": rows_per_receive_tx})
        if not got:
            raise RuntimeError(f"the floor table gave back {out} of {total} rows")
        out += len(got)
    done = clock()
    return {
        "inserted_per_s": total / (inserted_at - start),
        "deleted_per_s": total / (done - inserted_at),
        "end_to_end_per_s": total / (done - start),
    }
