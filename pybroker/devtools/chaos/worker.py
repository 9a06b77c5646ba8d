"""One receiving worker of a chaos run with ``--workers``, as its own process:

    python -m pybroker.devtools.chaos.worker CONFIG.json NAME INDEX

Service Broker's application model (C7): a loop of one transaction that RECEIVEs one
message from its instance's queue, processes it (a sleep of the run's ``processing``
seconds, inside the transaction), records it and COMMITs. Several of them take one queue
side by side, each holding the conversation group of the message it took until its
commit, so one conversation's messages are processed in order whichever worker takes them.

The record is written by the same transaction that received the message, so a message
is recorded exactly when it leaves the queue: a SEND on a dialog from the instance's
record service to itself (the record queue, which no one receives from, is the record,
as the receiving queue is in a run without workers). A record is a small JSON body: the
received message's conversation handle, sequence number and what its body says about
itself (checked here, as the checker would). Each start of a worker begins its own record
dialog, so no two workers share one (a SEND locks its conversation's group too).

A worker is a client of its instance's process (``node.py`` serves its file): it never
opens the file itself, and waits for the server while the instance is down (SIGKILLed,
starting); a worker SIGKILLed by the nemesis leaves its transaction to the server, which
rolls it back, so the message returns to the queue in order. While it holds a message,
the first byte of ``NAME.wINDEX.state`` is ``1`` (else ``0``): the runner reads it as it
kills, to report how many kills landed inside a transaction.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import traceback
from pathlib import Path
from typing import Any

from pybroker.devtools.chaos.workload import check_body

RECEIVE_WAIT = 0.5  # seconds a RECEIVE waits for a message (WAITFOR)
RETRY = 0.2  # seconds between attempts while the instance cannot be reached


def record(handle: str, sequence: int, body: bytes) -> bytes:
    """The record of one processed message (what the checker reads back)."""
    b = check_body(body)
    return json.dumps({"h": handle, "q": sequence, "c": b.conversation_id,
                       "s": b.sequence, "ok": b.ok}).encode()


def read_record(body: bytes) -> dict[str, Any] | None:
    """A record's fields, or None when the body is not a record."""
    try:
        fields = json.loads(body)
    except ValueError:
        return None
    return fields if isinstance(fields, dict) and {"h", "q", "c", "s", "ok"} <= set(
        fields) else None


def run(config_path: Path, name: str, index: int) -> int:
    from pybroker.api.served.client import connect_served
    from pybroker.errors import BrokerError

    config = json.loads(config_path.read_text())
    me = config["nodes"][name]
    processing = float(config["processing"])
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    state_fd = os.open(config_path.parent / f"{name}.w{index}.state",
                       os.O_RDWR | os.O_CREAT, 0o600)
    handled = 0
    last_error = ""

    def holding(flag: bytes) -> None:
        os.pwrite(state_fd, flag, 0)

    holding(b"0")
    print(f"{name}.w{index}: pid {os.getpid()}", flush=True)
    while not stop.is_set():
        client = None
        try:
            # the socket only: opening the file here would take it from the instance
            client = connect_served(me["file"])
            if client is None:  # the instance is down or not serving yet
                stop.wait(RETRY)
                continue
            db = client.database(me["database"])
            log = db.begin_dialog(me["record_service"], me["record_service"])
            while not stop.is_set():
                with db.transaction():
                    messages = db.receive(me["queue"], max_messages=1, timeout=RECEIVE_WAIT)
                    if not messages:
                        continue
                    holding(b"1")
                    m = messages[0]
                    stop.wait(processing)  # the application's work, inside the transaction
                    log.send(record(m.conversation_handle, m.message_sequence_number,
                                    m.message_body))
                holding(b"0")
                handled += 1
        except (BrokerError, OSError) as exc:
            # the instance went (SIGKILL, pause past a time-out) or refuses for a while (a
            # mirror is not principal): what the open transaction took is back in the queue
            holding(b"0")
            error = f"{type(exc).__name__}: {exc}"
            if error != last_error:  # a mirror's workers would repeat it 5 times a second
                print(f"{name}.w{index}: {error}", flush=True)
                last_error = error
            stop.wait(RETRY)
        finally:
            if client is not None:
                with contextlib.suppress(BrokerError, OSError):
                    client.close()
    print(f"{name}.w{index}: stopped after {handled} messages", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3 or not args[2].isdigit():
        print("usage: python -m pybroker.devtools.chaos.worker CONFIG.json NAME INDEX",
              file=sys.stderr)
        return 2
    try:
        return run(Path(args[0]), args[1], int(args[2]))
    except Exception:
        traceback.print_exc()
        return 1


if __name__ == "__main__":
    sys.exit(main())
