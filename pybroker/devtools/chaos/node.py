"""One instance of a chaos run, as its own process:

    python -m pybroker.devtools.chaos.node CONFIG.json NAME

Opens its file (made by the runner: objects, trusted peers, routes to the PROXIES'
addresses, the conversations it begins), starts its endpoint on its fixed port, and sends
its share of the workload in transactions, paced over the run's send window. It continues
from its own file after a SIGKILL (each conversation's ``send_sequence``), and writes a
status file (``NAME.status.json``) twice a second for the runner. SIGTERM stops it cleanly.
With receiving workers (``--workers``, worker.py) it serves its file to them on FILE.sock
and counts in its status what they have still to take from its queue.

Two things a topology adds (pybroker/devtools/chaos/topology.py): a partner of a mirrored pair takes
the role the runner writes to ``NAME.role`` (PRINCIPAL or MIRROR; read at every status, so
a promotion reaches a process that was down when it was asked), and a sender with an
``after`` plan begins those conversations once the runner writes ``failed_over`` (the
conversations begun after the failover). After a restart, its initiator conversations that
are not in ``plan`` are the ones begun after. A conversation that ended with an error (one
begun at the pair's former principal, which the new one does not know) sends no more: its
share ends at what it had sent.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from pybroker.devtools.chaos.workload import make_body
from pybroker.storage.templates import render


def _write_status(path: Path, status: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(status))
    os.replace(tmp, path)


def run(config_path: Path, name: str) -> int:
    from pybroker.api.instance import Instance
    from pybroker.errors import BrokerError

    config = json.loads(config_path.read_text())
    me = config["nodes"][name]
    run_dir = config_path.parent
    status_path = run_dir / f"{name}.status.json"
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    inst = Instance(me["file"], retry_scale=config["retry_scale"])
    try:
        if me.get("workers"):
            # the receiving workers (worker.py) are clients of this process (C7)
            from pybroker.server.server import serve_clients

            serve_clients(inst)
        deadline = time.monotonic() + 60
        while True:  # the port of a killed predecessor may take a moment to free
            try:
                inst.start_endpoint(me["port"], encryption=config["encryption"],
                                    fragment_size=config["fragment_size"],
                                    idle_timeout=config.get("idle_timeout"))
                break
            except BrokerError:
                if time.monotonic() > deadline or stop.is_set():
                    raise
                time.sleep(0.2)
        db = inst.database(me["database"])
        plan: dict[str, int] = dict(me["plan"])
        after = me.get("after")
        role_path = run_dir / f"{name}.role"
        flag_path = run_dir / "failed_over"

        def known() -> tuple[dict[str, int], dict[str, str]]:
            rows = inst.sql("SELECT conversation_handle, send_sequence, conversation_id FROM "
                            "sys.conversation_endpoints WHERE is_initiator").fetchall()
            return {h: s for h, s, _ in rows}, {h: c for h, _, c in rows}

        def plan_after(handles: list[str]) -> None:
            # one transaction began them all, so every start sees the same set, the same order
            for h, share in zip(sorted(handles), after["plan"], strict=True):
                plan[h] = share

        def total() -> int:
            return sum(plan.values()) + (
                sum(after["plan"]) if after and not begun_after else 0)

        def stop_ended() -> set[str]:
            """Conversations that ended with an error send no more (R9: one begun at a
            mirrored pair's former principal, refused by the new one): their share ends
            at what they sent. Returns them."""
            ended = {h for (h,) in inst.sql(
                "SELECT conversation_handle FROM sys.conversation_endpoints "
                "WHERE is_initiator AND state = 'ER'").fetchall()}
            for h in ended & set(next_seq):
                plan[h] = min(plan[h], next_seq[h])
            return ended

        seqs, ids = known()
        begun_after = sorted(set(seqs) - set(plan))
        if after and begun_after:
            plan_after(begun_after)
        next_seq = {h: s for h, s in seqs.items() if h in plan}
        stop_ended()
        planned = total()
        seed, big_every, max_body = config["seed"], config["big_every"], config["max_body"]
        # the send window runs from this node's first start, not from the run's setup: a
        # node that came up late on a loaded machine still spreads its messages over the
        # window instead of sending them all at once (a failover must find it sending)
        first_start = run_dir / f"{name}.first_start"
        if not first_start.exists():
            first_start.write_text(repr(time.time()))
        start = max(config["start"], float(first_start.read_text()))
        window = max(0.001, config["send_window"])
        batch, batch_bytes = config["batch"], 8 * 2**20
        handles = sorted(plan)
        turn = 0
        last_status = 0.0
        print(f"{name}: pid {os.getpid()} serving on {inst.endpoint.address}, "
              f"{sum(next_seq.values())} of {planned} sent before", flush=True)
        while not stop.is_set():
            if after and not begun_after and flag_path.exists():
                with db.transaction():
                    for _ in after["plan"]:
                        db.begin_dialog(me["service"], after["to"], contract=after["contract"])
                seqs, ids = known()
                begun_after = sorted(set(seqs) - set(plan))
                plan_after(begun_after)
                next_seq = {h: seqs[h] for h in plan}
                stop_ended()
                planned = total()
                handles = sorted(plan)
                print(f"{name}: began {len(after['plan'])} conversations after the failover",
                      flush=True)
            sent = sum(next_seq.values())
            # what is due counts only the conversations begun so far
            due = sum(plan[h] for h in next_seq) * min(1.0, (time.time() - start) / window)
            if sent < planned and sent < due:
                todo: list[tuple[str, int, bytes]] = []
                size = 0
                tried = 0
                while len(todo) < batch and size < batch_bytes and tried < len(handles):
                    h = handles[turn % len(handles)]
                    turn += 1
                    seq = next_seq[h] + sum(1 for t in todo if t[0] == h)
                    if seq >= plan[h]:
                        tried += 1
                        continue
                    tried = 0
                    body = make_body(seed, ids[h], seq, big_every=big_every,
                                     max_body=max_body)
                    todo.append((h, seq, body))
                    size += len(body)
                if todo:
                    try:
                        with db.transaction():
                            for h, _seq, body in todo:
                                db.conversation(h).send(
                                    body, message_type=config["message_type"])
                    except BrokerError:
                        # one of them ended with an error meanwhile: plan without it
                        if not stop_ended() & {h for h, _, _ in todo}:
                            raise
                        planned = total()
                        continue
                    for h, _seq, _body in todo:
                        next_seq[h] += 1
                else:  # every conversation begun so far has sent its share
                    stop.wait(0.05)
            else:
                stop.wait(0.05)
            now = time.monotonic()
            if now - last_status >= 0.5:
                last_status = now
                stop_ended()
                planned = total()
                role = None
                if me.get("mirrored"):
                    role = db.mirroring_role
                    with contextlib.suppress(OSError):
                        wanted = role_path.read_text().strip()
                        if wanted != role:
                            db.set_mirroring(wanted)  # a promotion (or demotion), R9.3
                            role = wanted
                            print(f"{name}: now {role}", flush=True)
                tq = inst.sql("SELECT count(*) FROM sys.transmission_queue").fetchone()[0]
                queued = inst.sql("SELECT count(*) FROM sys.queue_messages").fetchone()[0]
                unprocessed = inst.sql(render("chaos/select_unprocessed.sql"),
                                       {"queue": me["queue"]}).fetchone()[0] if me.get(
                    "workers") else 0
                _write_status(status_path, {
                    "pid": os.getpid(), "time": time.time(), "sent": sum(next_seq.values()),
                    "planned": planned, "tq": tq, "queued": queued, "role": role,
                    "unprocessed": unprocessed,  # left for the receiving workers
                    # messages still to send on the conversations begun so far
                    "unsent": sum(max(0, plan[h] - next_seq[h]) for h in next_seq)})
    finally:
        inst.close()
    print(f"{name}: stopped", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m pybroker.devtools.chaos.node CONFIG.json NAME", file=sys.stderr)
        return 2
    try:
        return run(Path(args[0]), args[1])
    except Exception:
        traceback.print_exc()
        return 1


if __name__ == "__main__":
    sys.exit(main())
