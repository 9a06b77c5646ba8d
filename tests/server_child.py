"""A client process of a served instance file, for tests/test_server_clients.py.

    server_child.py send FILE PREFIX CONVERSATIONS MESSAGES
        begin CONVERSATIONS dialogs Sender -> Receiver and send MESSAGES on each, one
        transaction per round (a message on every conversation), bodies PREFIX:k:i
    server_child.py receive FILE OUT DONE
        RECEIVE from ReceiverQueue, one transaction per group, until the file DONE exists
        and a RECEIVE finds nothing; one JSON line per transaction in OUT
    server_child.py hold FILE
        RECEIVE and SEND a reply in a transaction, print what it holds, and wait (to be
        killed)

Every loop is bounded in time (90 s).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pybroker

LIMIT = 90.0  # seconds


def send(path: str, prefix: str, conversations: int, messages: int) -> None:
    with pybroker.connect(path) as inst:
        assert "through" in repr(inst), repr(inst)
        db = inst.database("A")
        convs = [db.begin_dialog("Sender", "Receiver") for _ in range(conversations)]
        for i in range(messages):
            with db.transaction():
                for k, conv in enumerate(convs):
                    conv.send(f"{prefix}:{k}:{i}")
    print(f"sent {conversations * messages}", flush=True)


def receive(path: str, out: str, done: str) -> None:
    deadline = time.monotonic() + LIMIT
    with pybroker.connect(path) as inst, open(out, "w") as log:
        db = inst.database("A")
        while time.monotonic() < deadline:
            finished = Path(done).exists()  # before the RECEIVE that may find nothing
            with db.transaction():
                messages = db.receive("ReceiverQueue", max_messages=5, timeout=0.3)
                held = time.monotonic()  # the group is this transaction's from here
                if messages:
                    time.sleep(0.002)  # hold it a little, so holds would overlap if they could
                released = time.monotonic()  # ... to here at least (the commit follows)
            if not messages:
                if finished:
                    break
                continue
            log.write(json.dumps({
                "pid": os.getpid(), "group": messages[0].conversation_group_id,
                "groups": sorted({m.conversation_group_id for m in messages}),
                "handle": [m.conversation_handle for m in messages],
                "seq": [m.message_sequence_number for m in messages],
                "body": [m.text for m in messages], "held": held,
                "released": released}) + "\n")
    print("received", flush=True)


def hold(path: str) -> None:
    inst = pybroker.connect(path)
    db = inst.database("A")
    with db.transaction():
        messages = db.receive("ReceiverQueue", max_messages=100, timeout=10)
        # a written group too: a reply SENT inside the transaction that never commits
        db.conversation(messages[0].conversation_handle).send("reply")
        print("held " + json.dumps([m.message_sequence_number for m in messages]),
              flush=True)
        time.sleep(LIMIT)  # killed before this ends


if __name__ == "__main__":
    mode, *args = sys.argv[1:]
    if mode == "send":
        send(args[0], args[1], int(args[2]), int(args[3]))
    elif mode == "receive":
        receive(*args)
    elif mode == "hold":
        hold(args[0])
    else:
        raise SystemExit(f"unknown mode {mode}")
