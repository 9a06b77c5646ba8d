"""Two instances in two real processes on 127.0.0.1 (tests/wire_child.py): 10,000 messages
over 100 conversations arrive exactly once and in order while both processes are killed
with SIGKILL mid-stream and restarted, then replies and EndDialog go back (P3, P5, C1).

Every process is started by pid and stopped by pid in a ``finally``; every wait is bounded."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pybroker
from pybroker.kernel.messaging import message_parts
from tests.process_helpers import ROOT, Child, certificates, free_ports
from tests.process_helpers import child_env as _env
from tests.process_helpers import kill as _kill

CONVERSATIONS = 100
QUOTA = 100  # messages per conversation: 10,000 in all
BATCH = 50  # messages per conversation per transaction
END_DIALOG = "http://schemas.microsoft.com/SQL/ServiceBroker/EndDialog"


def check_exactly_once(a_file: Path, b_file: Path) -> dict[str, str]:
    """Every conversation's messages are in the receiver's queue once each, in order, and
    the sender has nothing unacknowledged. Returns conversation_id -> sender's handle."""
    a = pybroker.connect(a_file, worker=False)
    b = pybroker.connect(b_file, worker=False)
    try:
        sent = a.sql("SELECT conversation_id::VARCHAR, conversation_handle::VARCHAR, "
                     "send_sequence, first_unacked_send_sequence, far_broker_instance::VARCHAR,"
                     " state FROM sys.conversation_endpoints WHERE is_initiator").fetchall()
        assert len(sent) == CONVERSATIONS
        stock = b.database("Stock").broker_instance
        for cid, _, seq, unacked, far, state in sent:
            assert (seq, unacked, far, state) == (QUOTA, QUOTA, stock, "CO"), cid
        assert a.sql("SELECT count(*) FROM sys.transmission_queue").fetchone()[0] == 0
        rows = b.sql(
            "SELECT e.conversation_id::VARCHAR, m.message_sequence_number, m.status, "
            "decode(m.message_body) FROM queue_contents('Stock', 'StockQueue') AS m "
            "JOIN sys.conversation_endpoints AS e USING (conversation_handle) "
            "ORDER BY m.queuing_order").fetchall()
        got: dict[str, list[tuple[int, int, str]]] = {}
        for cid, seq, status, body in rows:
            got.setdefault(cid, []).append((seq, status, body))
        assert sorted(got) == sorted(cid for cid, *_ in sent)
        for cid, messages in got.items():  # no loss, no duplicate, in order, none held
            assert messages == [(n, 1, f"{cid}:{n}") for n in range(QUOTA)], cid
        assert b.sql("SELECT count(*) FROM main.message_fragments").fetchone()[0] == 0
        assert b.sql("SELECT count(*) FROM sys.transmission_queue").fetchone()[0] == 0
        assert b.sql("SELECT count(*), min(receive_sequence), max(receive_sequence) "
                     "FROM sys.conversation_endpoints").fetchone() == (
                         CONVERSATIONS, QUOTA, QUOTA)
        return {cid: handle for cid, handle, *_ in sent}
    finally:
        a.close()
        b.close()


def test_10000_messages_survive_sigkill_of_both_processes(tmp_path):
    a_file, b_file = tmp_path / "a.duckdb", tmp_path / "b.duckdb"
    a_pem, b_pem = certificates(a_file, b_file)
    a_port, b_port = free_ports(2)
    sender = Child(tmp_path / "a.log", "sender", a_file, a_port, b_port, b_pem,
                   CONVERSATIONS, QUOTA, BATCH)
    receiver = Child(tmp_path / "b.log", "receiver", b_file, b_port, a_port, a_pem)
    rng = random.Random(20261123)
    try:
        receiver.start()
        sender.start()
        receiver.listening()
        # SIGKILL mid-stream, three times each side, at moments the seed picks
        for victim in (sender, receiver, sender, receiver, receiver, sender):
            goal = min(sender.sent() + rng.randint(200, 900), CONVERSATIONS * QUOTA)
            deadline = time.monotonic() + 60
            while sender.sent() < goal and "done" not in sender.lines():
                assert time.monotonic() < deadline, sender.tail()
                assert sender.proc is not None and sender.proc.poll() is None, sender.tail()
                time.sleep(0.02)
            time.sleep(rng.uniform(0, 0.3))
            victim.kill()
            victim.start()
            victim.listening()
        assert sender.starts == 4 and receiver.starts == 4
        try:
            sender.wait_for("done", timeout=180)
            sender.wait_for("drained", timeout=180)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{receiver.stacks()}") from None
        sender.stop()
        receiver.stop()
        handles = check_exactly_once(a_file, b_file)

        # act 2: the target receives everything, replies and ends; the initiator ends too
        receiver.start("replier", b_file, b_port, a_port, a_pem, CONVERSATIONS, QUOTA)
        sender.start("closer", a_file, a_port, b_port, b_pem, CONVERSATIONS)
        try:  # bounds for a machine shared with others, not speed requirements
            receiver.wait_for("done", timeout=180)
            sender.wait_for("done", timeout=180)
            receiver.wait_for("drained", timeout=60)
            sender.wait_for("drained", timeout=60)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{sender.stacks()}") from None
        replies = sorted(x for x in sender.lines() if x.startswith("got "))
        assert replies == sorted(f"got //Shop/Order {cid}:reply" for cid in handles)
        sender.stop()
        receiver.stop()
    finally:
        sender.close()
        receiver.close()
    a = pybroker.connect(a_file, worker=False)
    b = pybroker.connect(b_file, worker=False)
    try:
        for inst in (a, b):  # both sides closed, nothing waits anywhere
            assert inst.sql("SELECT count(*), min(state), max(state) FROM "
                            "sys.conversation_endpoints").fetchone() in (
                                (CONVERSATIONS, "CD", "CD"), (0, None, None))
            assert inst.sql("SELECT count(*) FROM sys.transmission_queue").fetchone()[0] == 0
            assert inst.sql("SELECT count(*) FROM sys.queue_messages").fetchone()[0] == 0
    finally:
        a.close()
        b.close()


def test_a_20_mb_message_survives_sigkill_mid_reassembly(tmp_path):
    """The fragments that arrived are kept in message_fragments across a SIGKILL of the
    receiver (and acknowledged again after the restart); a SIGKILL of the sender sends
    the message again; the body arrives whole, once, between its neighbours (P4.4), kept
    in its queue as its fragments until RECEIVE reads it back."""
    a_file, b_file = tmp_path / "a.duckdb", tmp_path / "b.duckdb"
    a_pem, b_pem = certificates(a_file, b_file)
    a_port, b_port = free_ports(2)
    env = {"WIRE_CHILD_FRAGMENT_SIZE": str(256 * 1024), "WIRE_CHILD_RETRY_SCALE": "0.25"}
    sender = Child(tmp_path / "a.log", "bigsender", a_file, a_port, b_port, b_pem, 20,
                   env=env)
    receiver = Child(tmp_path / "b.log", "receiver", b_file, b_port, a_port, a_pem, env=env)

    def until_fragments(at_least: int) -> int:
        deadline = time.monotonic() + 60
        while (held := receiver.fragments()) < at_least:
            assert receiver.proc is not None and receiver.proc.poll() is None, receiver.tail()
            assert "drained" not in sender.lines(), "the message arrived before the kill"
            assert time.monotonic() < deadline, receiver.tail()
            time.sleep(0.02)
        return held

    try:
        receiver.start()
        sender.start()
        until_fragments(1)
        receiver.kill()
        receiver.start()
        held = until_fragments(1)  # what arrived before the kill is still there
        assert held < 80
        sender.kill()
        sender.start()
        sender.wait_for("drained", timeout=120)
        sender.stop()
        receiver.stop()
    finally:
        sender.close()
        receiver.close()
    b = pybroker.connect(b_file, worker=False)
    a = pybroker.connect(a_file, worker=False)
    try:
        rows = b.sql("SELECT message_sequence_number, status, message_body "
                     "FROM queue_contents('Stock', 'StockQueue')").fetchall()
        assert [(seq, status) for seq, status, _ in rows] == [(0, 1), (1, 1), (2, 1)]
        assert rows[0][2] == b"first" and rows[2][2] == b"last"
        assert rows[1][2] == bytes(range(256)) * (20 * 2**20 // 256)
        # the big one waits in its queue as its 80 fragments, each once (message_parts.py)
        assert b.sql("SELECT message_sequence_number, body_fragments FROM main.queue_messages "
                     "ORDER BY queuing_order").fetchall() == [(0, None), (1, 80), (2, None)]
        assert b.sql("SELECT count(*), count(DISTINCT fragment_number), "
                     "min(message_sequence_number), max(message_sequence_number) "
                     "FROM main.message_fragments").fetchone() == (
                         80 * -(-256 * 1024 // message_parts.PIECE_SIZE), 80, 1, 1)  # pieces
        assert a.sql("SELECT count(*) FROM sys.transmission_queue").fetchone()[0] == 0
    finally:
        a.close()
        b.close()
    with pybroker.connect(b_file, worker=False) as b:
        got = b.database("Stock").receive("StockQueue", max_messages=3)
        assert [m.message_body for m in got] == [
            b"first", bytes(range(256)) * (20 * 2**20 // 256), b"last"]
        assert b.sql("SELECT count(*) FROM main.message_fragments").fetchone()[0] == 0


def _serve(log: Path, file: Path, port: int, *trust: str) -> subprocess.Popen:
    args = [sys.executable, "-m", "pybroker", "serve", str(file), "--port", str(port),
            "--retry-scale", "0.01"]
    for item in trust:
        args += ["--trust", item]
    with log.open("a") as out, log.with_suffix(".err").open("a") as err:
        return subprocess.Popen(args, cwd=ROOT, stdout=out, stderr=err, env=_env())


def _stop_serving(procs: list[subprocess.Popen], logs: list[Path]) -> None:
    for proc in procs:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
    for proc, log in zip(procs, logs, strict=True):
        try:
            assert proc.wait(timeout=60) == 0, log.with_suffix(".err").read_text()
        finally:
            _kill(proc)
        assert log.read_text().splitlines()[-1] == "stopped"


def _serve_for(seconds: float, a_file: Path, b_file: Path, a_port: int, b_port: int,
               a_trust: list[str], b_trust: list[str], tmp_path: Path) -> None:
    """Both instances under ``pybroker serve`` until both listen, then ``seconds`` more."""
    logs = [tmp_path / "a-serve.log", tmp_path / "b-serve.log"]
    for log in logs:
        log.write_text("")
    procs = [_serve(logs[0], a_file, a_port, *a_trust),
             _serve(logs[1], b_file, b_port, *b_trust)]
    try:
        for log, port in zip(logs, (a_port, b_port), strict=True):
            deadline = time.monotonic() + 60
            while f"listening on tcp://127.0.0.1:{port}" not in log.read_text().splitlines():
                assert time.monotonic() < deadline, log.with_suffix(".err").read_text()
                assert all(p.poll() is None for p in procs), [
                    x.with_suffix(".err").read_text() for x in logs]
                time.sleep(0.05)
        time.sleep(seconds)
        _stop_serving(procs, logs)
    finally:
        for proc in procs:
            _kill(proc)
    for log in logs:  # only the operator's lines on stderr: no traceback, no task pending
        lines = log.with_suffix(".err").read_text().splitlines()
        assert all(line.startswith(("broker connection ", "client ")) for line in lines), lines


def test_pybroker_serve_refuses_an_untrusted_peer_then_delivers(tmp_path):
    a_file, b_file = tmp_path / "a.duckdb", tmp_path / "b.duckdb"
    a_port, b_port = free_ports(2)
    a, b = pybroker.connect(a_file), pybroker.connect(b_file)
    try:
        shop, stock = a.create_database("Shop"), b.create_database("Stock")
        for db in (shop, stock):
            db.create_message_type("//Shop/Order")
            db.create_contract("//Shop/OrderContract", {"//Shop/Order": "ANY"})
        shop.create_queue("ShopQueue")
        shop.create_service("ShopService", queue="ShopQueue")
        stock.create_queue("StockQueue")
        stock.create_service("StockService", queue="StockQueue",
                             contracts=["//Shop/OrderContract"])
        shop.create_route("ToStock", service_name="StockService",
                          address=f"tcp://127.0.0.1:{b_port}")
        conv = shop.begin_dialog("ShopService", "StockService",
                                 contract="//Shop/OrderContract")
        with shop.transaction():  # no endpoint yet: they wait in the transmission queue
            for i in range(10):
                conv.send(f"<order n='{i}'/>", message_type="//Shop/Order")
    finally:
        a.close()
        b.close()
    a_pem, b_pem = certificates(a_file, b_file)
    # B does not trust A: refused, said on both sides, nothing delivered
    for _ in range(5):
        _serve_for(1.0, a_file, b_file, a_port, b_port, [f"B={b_pem}"], [], tmp_path)
        with pybroker.connect(b_file, worker=False) as b:
            refusals = b.sql("SELECT count(*) FROM sys.broker_events "
                             "WHERE subclass = 'Authentication Failure'").fetchone()[0]
            assert b.sql("SELECT count(*) FROM sys.queue_messages").fetchone()[0] == 0
        if refusals:
            break
    assert refusals
    # the operator watching B's serve saw the refusal, with its reason
    refused = [line for line in (tmp_path / "b-serve.err").read_text().splitlines()
               if line.startswith("broker connection refused (")]
    assert refused, (tmp_path / "b-serve.err").read_text()
    with pybroker.connect(a_file, worker=False) as a:
        statuses = {s for (s,) in a.sql(
            "SELECT DISTINCT transmission_status FROM sys.transmission_queue").fetchall()}
        assert a.sql("SELECT count(*) FROM sys.transmission_queue").fetchone()[0] == 10
    assert len(statuses) == 1 and statuses.pop().startswith(
        "Connection attempt failed with error: 'the peer did not accept this instance")
    # B trusts A (--trust keeps it in the file): the ten arrive, once, in order
    for _ in range(5):
        _serve_for(1.0, a_file, b_file, a_port, b_port, [], [f"A={a_pem}"], tmp_path)
        with pybroker.connect(a_file, worker=False) as a:
            if a.sql("SELECT count(*) FROM sys.transmission_queue").fetchone()[0] == 0:
                break
    with pybroker.connect(b_file, worker=False) as b:
        assert b.sql("SELECT message_sequence_number, decode(message_body) FROM "
                     "queue_contents('Stock', 'StockQueue')").fetchall() == [
                         (i, f"<order n='{i}'/>") for i in range(10)]
        assert [n for (n,) in b.sql("SELECT name FROM sys.certificates").fetchall()] == ["A"]
