"""Durability: killing the process (SIGKILL) at any moment loses no committed
message and duplicates none; after reopening, every committed send is received exactly
once, in order (P3.1, P3.2, C3)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pybroker

REPO = Path(__file__).resolve().parents[1]

CHILD = textwrap.dedent("""
    import sys
    sys.path.insert(0, {repo!r})
    import pybroker
    inst = pybroker.connect({path!r}, worker=False)
    a, b = inst.database("A"), inst.database("B")
    conv = a.conversation({handle!r})
    n = {start}
    while True:
        with a.transaction():
            for _ in range(50):
                conv.send(str(n))
                n += 1
        print(n, flush=True)  # everything below n is committed
        if {receive}:  # relay some back, receive and send in one transaction
            with b.transaction():
                for _ in range(3):  # the second and third RECEIVE read ahead
                    for m in b.receive("QB", max_messages=7):
                        b.conversation(m.conversation_handle).send(m.message_body)
""")


def test_sigkill_mid_stream_loses_and_duplicates_nothing(tmp_path):
    path = tmp_path / "durable.duckdb"
    with pybroker.connect(path, worker=False) as inst:
        a, b = inst.create_database("A"), inst.create_database("B")
        a.create_queue("QA")
        a.create_service("SA", queue="QA")
        b.create_queue("QB")
        b.create_service("SB", queue="QB", contracts=["DEFAULT"])
        handle = a.begin_dialog("SA", "SB").handle
    committed = 0
    received: list[int] = []
    for round_ in range(4):
        script = CHILD.format(repo=str(REPO), path=str(path), handle=handle, start=committed,
                              receive=round_ % 2 == 1)
        child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                                 text=True)
        last = None
        deadline = time.monotonic() + 60
        assert child.stdout is not None
        while time.monotonic() < deadline:  # let it commit a few batches, then kill it
            line = child.stdout.readline()
            if not line:
                break
            last = int(line)
            if last >= committed + 200 + 37 * round_:
                break
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        assert last is not None, "the child committed nothing"
        with pybroker.connect(path, worker=False) as inst:  # recovery from the WAL
            (sent,) = inst.sql("SELECT send_sequence FROM sys.conversation_endpoints "
                               "WHERE is_initiator").fetchone()
            assert sent >= last  # no committed send lost (more may have committed unseen)
            assert sent % 50 == 0  # a transaction is all or nothing
            committed = sent
            if round_ % 2 == 0:  # drain here sometimes, in the parent
                b = inst.database("B")
                while got := b.receive("QB", max_messages=100):
                    received.extend(int(m.message_body) for m in got)
    with pybroker.connect(path, worker=False) as inst:
        a, b = inst.database("A"), inst.database("B")
        relayed = [int(m.message_body) for m in a.receive("QA", max_messages=100_000)]
        left = [int(m.message_body) for m in b.receive("QB", max_messages=100_000)]
        assert relayed and received and left  # every path was exercised
        assert relayed == sorted(relayed) and left == sorted(left)  # P3.1: in order
        # every committed send was received exactly once: by the parent, relayed back by
        # a child (receive + send in one transaction), or still in the queue
        assert sorted(received + relayed + left) == list(range(committed))
        (seq,) = inst.sql("SELECT receive_sequence FROM sys.conversation_endpoints "
                          "WHERE NOT is_initiator").fetchone()
        assert seq == committed
