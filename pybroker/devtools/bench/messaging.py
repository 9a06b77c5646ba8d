"""``pybroker bench messaging``: the messaging targets, measured.

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
- (c) RECEIVE in its own transaction: 20,000 messages over 100 conversations sent
  in one transaction, then drained by a loop of ``receive(max_messages=1000, timeout=1)``
  with no transaction around it (each call commits one conversation group); compared with
  the storage floor of that shape (one INSERT ... SELECT, then one DELETE ... RETURNING of
  one group per transaction);
- idle conversations (P7, pybroker/devtools/bench/idle.py), in a child process of its own so its
  resident memory is its own: begin N conversations in transactions of 1,000, one message
  each, committed and left idle; resident memory (RSS) growth, overall and per window of a
  million, begin+send per second per window (the last against the first), DuckDB's own
  share by tag (duckdb_memory()), and the time per begin_dialog() and per conversation;
- activation (C3, pybroker/devtools/bench/activation.py), on an instance of its own: messages/s
  handled by an activated queue's readers with MAX_QUEUE_READERS 1 and 4 (the messages of
  case (b) sent while activation runs), and the time from a commit to the start of the
  reader it activates (p50 and max of 10);
- workers (C7, pybroker/devtools/bench/workers.py): 1, 4 and 8 threads each receiving one
  message per transaction and processing it for 50 ms before COMMIT, over 40
  conversations; messages/s and the speed-up over one worker; the same with a SEND of a
  reply inside each transaction before its processing (the writers' shape); and the
  same shape with an activated queue's readers as the workers (MAX_QUEUE_READERS 4
  against 1, target 3.5x);
- bystander (C7, pybroker/devtools/bench/bystander.py): while one transaction holds its
  group after RECEIVE, BEGIN DIALOG + SEND to another queue, a transaction each: p50 and
  p99 (target p99 <= 50 ms);
- activation by a T-SQL procedure (C8, pybroker/devtools/bench/tsql_activation.py): a
  WHILE loop of WAITFOR (RECEIVE TOP (100) ...), IF on message_type_name, a reply SEND,
  against a Python callable of the same shape, one reader each: both rates and the ratio
  (target >= 50 %);
- comparison, measured in the same run: the storage floor, the same rows put into a bare
  table of queue_messages' columns with one INSERT ... SELECT per send transaction and
  taken out with one DELETE ... RETURNING per receive transaction (no endpoints, no
  routing, no column encoding); ratio = floor throughput / pybroker throughput.

Each figure is the median of ``repeat`` runs in one process (the idle and activation
cases run once). The
instance runs without its background worker (nothing in the workload is due; it would only
add noise). The load average (1 minute) before and after is part of the report: this is a
shared machine.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

from pybroker.api.database import Database
from pybroker.api.instance import Instance
from pybroker.devtools.bench import activation, bystander, idle, tsql_activation, workers
from pybroker.devtools.bench.figures import machine, median_of, percentiles_ms
from pybroker.devtools.bench.objects import initiator_and_target

BODY_BYTES = 256
FULL = {"messages": 20_000, "conversations": 1_000, "sends_per_transaction": 1_000,
        "max_messages": 1_000, "receives_per_transaction": 50, "single": 200,
        "drain_conversations": 100, "idle_conversations": 100_000, "workers_messages": 160,
        "workers_conversations": 40, "workers_processing": 0.05, "bystander_sends": 500,
        "tsql_activation_messages": 10_000}
QUICK = {"messages": 2_000, "conversations": 100, "sends_per_transaction": 500,
         "max_messages": 1_000, "receives_per_transaction": 50, "single": 20,
         "drain_conversations": 10, "idle_conversations": 5_000, "workers_messages": 16,
         "workers_conversations": 8, "workers_processing": 0.02, "bystander_sends": 50,
         "tsql_activation_messages": 500}
TARGETS = {"end_to_end_per_s": 20_000.0,
           "idle_rss_bytes_per_conversation": idle.TARGETS["rss_bytes_per_conversation_1m"]}


def run(*, repeat: int = 5, quick: bool = False, sizes: dict[str, int] | None = None,
        idle_conversations: int | None = None) -> dict[str, Any]:
    """Run the benchmark; ``sizes`` overrides FULL/QUICK (tests pass tiny ones);
    ``idle_conversations`` the size of the idle case (0: skip it)."""
    sizes = {**FULL, **(sizes or (QUICK if quick else FULL))}
    if idle_conversations is not None:
        sizes["idle_conversations"] = idle_conversations
    load_before = os.getloadavg()[0]
    idled = (idle.run_in_child(sizes["idle_conversations"]) if sizes["idle_conversations"]
             else None)
    body = os.urandom(BODY_BYTES)
    with (
        tempfile.TemporaryDirectory(prefix="pybroker-bench-") as tmp,
        Instance(Path(tmp) / "bench.duckdb", worker=False) as inst,
    ):
        initiator, target = initiator_and_target(inst)
        inst.kernel.store.run("bench/create_messaging_floor.sql")
        one, many, single, floor_one, floor_many = [], [], [], [], []
        drain, floor_drain = [], []
        for _ in range(repeat):
            one.append(_stream(initiator, target, 1, sizes, body))
            many.append(_stream(initiator, target, sizes["conversations"], sizes, body))
            single.append(_single(initiator, target, sizes["single"], body))
            drain.append(_drain(initiator, target, sizes, body))
            floor_one.append(_floor(inst, 1, sizes, body))
            floor_many.append(_floor(inst, sizes["conversations"], sizes, body))
            floor_drain.append(_floor_drain(inst, sizes, body))
    activated = [activation.run_case(sizes, body, readers) for readers in (1, 4)]
    side_by_side = workers.run(sizes)
    side_by_side_writers = workers.run(sizes, reply=True)
    side_by_side_activated = workers.run_activation(sizes)
    beside = bystander.run(int(sizes["bystander_sends"])) if sizes["bystander_sends"] else None
    by_tsql = (tsql_activation.run(sizes, body) if sizes["tsql_activation_messages"]
               else None)
    report = {
        "machine": machine(),
        "load_average_1m": {"before": load_before, "after": os.getloadavg()[0]},
        "sizes": sizes,
        "body_bytes": BODY_BYTES,
        "repeat": repeat,
        "one_conversation": median_of(one),
        "many_conversations": median_of(many),
        "one_per_transaction": median_of(single),
        "receive_own_transaction": median_of(drain),
        "floor_one_conversation": median_of(floor_one),
        "floor_many_conversations": median_of(floor_many),
        "floor_receive_own_transaction": median_of(floor_drain),
        "idle_conversations": idled,
        "activation": activated,
        "workers": side_by_side,
        "workers_writing": side_by_side_writers,
        "workers_activation": side_by_side_activated,
        "bystander": beside,
        "tsql_activation": by_tsql,
        "targets": TARGETS,
    }
    for name in ("one_conversation", "many_conversations", "receive_own_transaction"):
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
        f"{o['receive_p99_ms']:.2f} ms; CPU a SEND {o['send_cpu_ms']:.2f} ms, a receive() "
        f"{o['receive_cpu_ms']:.2f} ms",
    ]
    r, f = report["receive_own_transaction"], report["floor_receive_own_transaction"]
    verdict = "met" if r["end_to_end_per_s"] >= target else "MISSED"
    lines += [
        f"(c) RECEIVE in its own transaction: {s['messages']:,} messages over "
        f"{s['drain_conversations']:,} conversations sent in one transaction "
        f"({r['sent_per_s']:,.0f}/s), drained by receive(max_messages={s['max_messages']:,}, "
        f"timeout=1) with no transaction: {r['received_per_s']:,.0f}/s "
        f"({r['receive_p50_ms']:.2f} ms per call p50, {r['receive_p99_ms']:.2f} p99), end to "
        f"end {r['end_to_end_per_s']:,.0f}/s (target >= {target:,.0f}/s: {verdict})",
        f"    storage floor (one INSERT ... SELECT, then one DELETE ... RETURNING of a group "
        f"per transaction): {f['end_to_end_per_s']:,.0f}/s end to end; floor/pybroker "
        f"{r['ratio_floor']:.1f}x",
    ]
    if report["idle_conversations"] is not None:
        lines += idle.format_case(report["idle_conversations"])
    lines += [activation.format_case(r) for r in report.get("activation", ())]
    lines += workers.format_cases(report.get("workers", []))
    lines += workers.format_cases(report.get("workers_writing", []))
    lines += workers.format_activation_cases(report.get("workers_activation", []))
    lines += bystander.format_case(report.get("bystander"))
    lines += tsql_activation.format_case(report.get("tsql_activation"))
    load = report["load_average_1m"]
    lines.append(f"load average (1 min): {load['before']:.2f} before, {load['after']:.2f} "
                 "after")
    return "\n".join(lines)


# -- workload ------------------------------------------------------------------------------





def _p50_p99(samples: list[float]) -> tuple[float, float]:
    figures = percentiles_ms(samples)
    return figures["p50_ms"], figures["p99_ms"]


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
    p50, p99 = _p50_p99(samples)
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
    clock, cpu = time.perf_counter, time.process_time
    sends, receives = [], []
    cpu_start = cpu()
    for _ in range(count):
        before = clock()
        conv.send(body)
        sends.append(clock() - before)
    cpu_sent = cpu()
    for _ in range(count):
        before = clock()
        got = target.receive("TargetQueue")
        receives.append(clock() - before)
        if len(got) != 1:
            raise RuntimeError(f"receive() returned {len(got)} messages, expected 1")
    cpu_received = cpu()
    send_p50 = percentiles_ms(sends)["p50_ms"]
    p50, p99 = _p50_p99(receives)
    return {
        "send_per_s": count / sum(sends),
        "receive_per_s": count / sum(receives),
        "send_p50_ms": send_p50,
        "receive_p50_ms": p50,
        "receive_p99_ms": p99,
        # CPU of this process a call (its commit's included): less moved by other load
        # than the wall-clock figures, which the commit's wait for the disk dominates
        "send_cpu_ms": (cpu_sent - cpu_start) / count * 1000,
        "receive_cpu_ms": (cpu_received - cpu_sent) / count * 1000,
    }


def _drain(initiator: Database, target: Database, sizes: dict[str, int],
           body: bytes) -> dict[str, float]:
    """(c) Every message sent in one transaction (round robin), then a loop of receive()
    calls with no transaction around them: each call commits one conversation group."""
    total, conversations = sizes["messages"], sizes["drain_conversations"]
    with initiator.transaction():
        convs = [initiator.begin_dialog("InitiatorService", "TargetService")
                 for _ in range(conversations)]
    clock = time.perf_counter
    start = clock()
    with initiator.transaction():
        for i in range(total):
            convs[i % conversations].send(body)
    sent_at = clock()
    received, samples = 0, []
    last_seen: dict[str, int] = {}
    while received < total:
        before = clock()
        got = target.receive("TargetQueue", max_messages=sizes["max_messages"], timeout=1)
        samples.append(clock() - before)
        if not got:
            raise RuntimeError(f"received {received} of {total} messages")
        received += len(got)
        for m in got:  # P3.1: in order, exactly once
            if m.message_sequence_number != last_seen.get(m.conversation_handle, -1) + 1:
                raise RuntimeError(f"message {m.message_sequence_number} of "
                                   f"{m.conversation_handle} out of order")
            last_seen[m.conversation_handle] = m.message_sequence_number
    done = clock()
    if received != total:
        raise RuntimeError(f"received {received} messages, sent {total}")
    p50, p99 = _p50_p99(samples)
    return {
        "messages": total,
        "sent_per_s": total / (sent_at - start),
        "received_per_s": total / (done - sent_at),
        "end_to_end_per_s": total / (done - start),
        "messages_per_receive": received / len(samples),
        "receive_p50_ms": p50,
        "receive_p99_ms": p99,
    }


def _floor_drain(inst: Instance, sizes: dict[str, int], body: bytes) -> dict[str, float]:
    """(c)'s storage floor: one INSERT ... SELECT, then a group per transaction."""
    store = inst.kernel.store
    total = sizes["messages"]
    clock = time.perf_counter
    start = clock()
    with store.transaction():
        store.run("bench/insert_messaging_floor.sql", {
            "first": 0, "last": total, "conversations": sizes["drain_conversations"],
            "body": body, "now": inst.kernel.now()})
    out = 0
    while out < total:
        with store.transaction():
            got = store.run("bench/delete_messaging_floor_group.sql",
                            {"rows": sizes["max_messages"]})
        if not got:
            raise RuntimeError(f"the floor table gave back {out} of {total} rows")
        out += len(got)
    return {"end_to_end_per_s": total / (clock() - start)}


def _floor(inst: Instance, conversations: int, sizes: dict[str, int],
           body: bytes) -> dict[str, float]:
    """The same rows through a bare table: one statement per transaction each way."""
    store = inst.kernel.store
    total, per_tx = sizes["messages"], sizes["sends_per_transaction"]
    rows_per_receive_tx = min(total, sizes["max_messages"] * sizes["receives_per_transaction"],
                              max(1, total // conversations) * sizes[
                                  "receives_per_transaction"])
    now = inst.kernel.now()
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
