"""One client process of ``pybroker bench serve``, and the workload it runs.

``python -m pybroker.devtools.bench.serve_child FILE`` connects with ``pybroker.connect(FILE)``
while ``pybroker serve FILE`` holds it: a client on the server's Unix socket. The workload
functions here are also what the parent runs on an embedded instance for the comparison,
so both measure the same code. The process answers one JSON command per line on stdin with
one JSON line on stdout; the parent (``pybroker.devtools.bench.serve``) drives it. Times that
cross processes are ``time.time()``.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import pybroker
from pybroker.api.database import Database
from pybroker.api.instance import Instance
from pybroker.api.served import protocol
from pybroker.api.served.paths import socket_path_for, unix_address

DATABASE = "BenchServe"
BODY_BYTES = 256
QUERY = "SELECT * FROM sys.transmission_queue"
LIMIT = 600.0  # seconds any one loop may run


def names(slot: int) -> dict[str, str]:
    """A slot is one client's own services and queues: its conversations and messages
    meet nobody else's, so every client (and the embedded run) does the same work."""
    return {"initiator": f"Initiator{slot}", "target": f"Target{slot}",
            "initiator_queue": f"InitiatorQueue{slot}", "target_queue": f"TargetQueue{slot}"}


def build(inst: Instance, slots: int) -> None:
    """The objects of ``slots`` slots, in one database."""
    db = inst.create_database(DATABASE)
    for slot in range(slots):
        n = names(slot)
        db.create_queue(n["initiator_queue"])
        db.create_service(n["initiator"], queue=n["initiator_queue"])
        db.create_queue(n["target_queue"])
        db.create_service(n["target"], queue=n["target_queue"], contracts=["DEFAULT"])


# -- the workload (the same for a client and for the embedded run) ---------------------------


def begin(db: Database, slot: int, conversations: int) -> list[Any]:
    n = names(slot)
    with db.transaction():
        return [db.begin_dialog(n["initiator"], n["target"]) for _ in range(conversations)]


def run_slot(db: Database, slot: int, convs: list[Any], messages: int, per_tx: int,
             body: bytes) -> int:
    """``messages`` sends round robin over the slot's conversations, ``per_tx`` to a
    transaction, then RECEIVE of all of them from the slot's target queue (each receive()
    its own transaction), checking every conversation's order (P3.1). Returns how many
    messages came back."""
    sent = 0
    while sent < messages:
        upto = min(messages, sent + per_tx)
        with db.transaction():
            for i in range(sent, upto):
                convs[i % len(convs)].send(body)
        sent = upto
    queue = names(slot)["target_queue"]
    received = 0
    last_seen: dict[str, int] = {}
    deadline = time.monotonic() + LIMIT
    while received < messages:
        if time.monotonic() > deadline:
            raise RuntimeError(f"slot {slot}: received {received} of {messages} messages")
        got = db.receive(queue, max_messages=per_tx, timeout=1)
        if not got:
            raise RuntimeError(f"slot {slot}: received {received} of {messages} messages")
        for m in got:
            if m.message_sequence_number != last_seen.get(m.conversation_handle, -1) + 1:
                raise RuntimeError(f"slot {slot}: message {m.message_sequence_number} of "
                                   f"{m.conversation_handle} came out of order or twice")
            last_seen[m.conversation_handle] = m.message_sequence_number
        received += len(got)
    return received


def run_slots(db: Database, convs: dict[int, list[Any]], messages: int,
              per_tx: int) -> dict[str, Any]:
    """run_slot for each slot, one after another, timed."""
    body = os.urandom(BODY_BYTES)
    cpu = time.process_time()
    start = time.time()
    received = sum(run_slot(db, slot, slot_convs, messages, per_tx, body)
                   for slot, slot_convs in convs.items())
    return {"start": start, "done": time.time(), "received": received,
            "cpu_seconds": time.process_time() - cpu}


# -- the child ---------------------------------------------------------------------------------


class Child:
    """Connects at "hello", not before: the parent starts its processes while it still
    builds the file and starts the server (a client connecting earlier would open the
    file itself)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.inst: Instance | None = None
        self.convs: dict[int, list[Any]] = {}
        self.idle: list[socket.socket] = []

    def handle(self, cmd: str, args: dict[str, Any]) -> dict[str, Any]:
        if cmd == "hello":
            if self.inst is None:
                self.inst = pybroker.connect(self.path)
                self.db = self.inst.database(DATABASE)
            return {"pid": os.getpid(), "client": bool(getattr(self.inst, "is_client", False))}
        if self.inst is None:
            raise RuntimeError(f"{cmd} before hello")
        if cmd == "begin":
            for slot in args["slots"]:
                self.convs[slot] = begin(self.db, slot, args["conversations"])
            return {}
        if cmd == "run":
            return run_slots(self.db, {slot: self.convs.pop(slot) for slot in args["slots"]},
                             args["messages"], args["per_tx"])
        if cmd == "query":
            return self.query(Path(args["stop_file"]), args["interval"], args["limit"])
        if cmd == "idle":
            return self.open_idle(args["count"])
        if cmd == "close_idle":
            closed = len(self.idle)
            self.close_idle()
            return {"closed": closed}
        raise ValueError(f"unknown command {cmd!r}")

    def query(self, stop_file: Path, interval: float, limit: int) -> dict[str, Any]:
        """QUERY through this client, round trip timed here, every ``interval`` seconds until
        ``stop_file`` exists (at most ``limit`` queries, LIMIT seconds)."""
        inst = self.inst
        assert inst is not None
        latencies: list[float] = []
        rows_max = 0
        deadline = time.monotonic() + LIMIT
        while len(latencies) < limit and time.monotonic() < deadline:
            if stop_file.exists():
                break
            before = time.perf_counter()
            rows = inst.sql(QUERY).fetchall()
            latencies.append(time.perf_counter() - before)
            rows_max = max(rows_max, len(rows))
            time.sleep(interval)
        return {"latencies": latencies, "rows_max": rows_max}

    def open_idle(self, count: int) -> dict[str, Any]:
        """``count`` connections that say HELLO, are welcomed, and then say nothing."""
        address, fd = unix_address(socket_path_for(Path(self.path)))
        try:
            for _ in range(count):
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self.idle.append(sock)
                sock.settimeout(30.0)
                sock.connect(address)
                sock.sendall(protocol.hello(None, False, f"bench idle pid {os.getpid()}"))
                reader = protocol.FrameReader()
                while (event := reader.next_event()) is None:
                    data = sock.recv(65536)
                    if not data:
                        raise RuntimeError("the server closed an idle connection")
                    reader.feed(data)
                if not isinstance(event, protocol.Welcome):
                    raise RuntimeError(f"an idle connection was not welcomed: {event}")
        finally:
            if fd is not None:
                os.close(fd)
        return {"opened": len(self.idle)}

    def close_idle(self) -> None:
        for sock in self.idle:
            with contextlib.suppress(OSError):
                sock.close()
        self.idle = []

    def close(self) -> None:
        self.close_idle()
        if self.inst is not None:
            self.inst.close()


def main(argv: list[str]) -> int:
    out = sys.stdout
    sys.stdout = sys.stderr  # only replies on the real stdout
    child = Child(argv[0])
    try:
        for line in sys.stdin:
            request = json.loads(line)
            cmd = request.pop("cmd")
            if cmd == "quit":
                break
            try:
                reply = child.handle(cmd, request)
            except Exception as exc:
                reply = {"error": f"{type(exc).__name__}: {exc}",
                         "traceback": traceback.format_exc()}
            out.write(json.dumps(reply) + "\n")
            out.flush()
    finally:
        child.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
