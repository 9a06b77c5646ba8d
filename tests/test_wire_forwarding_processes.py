"""A -> forwarder F -> B in three real processes on 127.0.0.1 (tests/wire_child.py): F is
killed with SIGKILL mid-stream and restarted, and still every message arrives exactly once
and in order, because F holds nothing durable and only B acknowledges (R7.3, P5.3).

Every process is started by pid and stopped by pid in a ``finally``; every wait is bounded."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pybroker
from tests.process_helpers import Child, certificates, free_ports

CONVERSATIONS = 20
QUOTA = 100  # messages per conversation: 2,000 in all
BATCH = 25


def check_exactly_once(a_file: Path, b_file: Path, f_file: Path) -> None:
    a = pybroker.connect(a_file, worker=False)
    b = pybroker.connect(b_file, worker=False)
    f = pybroker.connect(f_file, worker=False)
    try:
        sent = a.sql("SELECT conversation_id::VARCHAR, send_sequence, "
                     "first_unacked_send_sequence, far_broker_instance::VARCHAR "
                     "FROM sys.conversation_endpoints WHERE is_initiator").fetchall()
        stock = b.database("Stock").broker_instance
        assert sorted((seq, unacked, far) for _, seq, unacked, far in sent) == [
            (QUOTA, QUOTA, stock)] * CONVERSATIONS  # acknowledged by B, through F
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
        # the forwarder wrote nothing of the dialogs
        assert f.sql("SELECT count(*) FROM sys.conversation_endpoints").fetchone()[0] == 0
        assert f.sql("SELECT count(*) FROM main.message_fragments").fetchone()[0] == 0
    finally:
        a.close()
        b.close()
        f.close()


def test_R7_3_a_forwarder_killed_mid_stream_loses_and_duplicates_nothing(tmp_path):
    a_file, f_file, b_file = (tmp_path / f"{n}.duckdb" for n in "afb")
    a_pem, f_pem, b_pem = certificates(a_file, f_file, b_file)
    a_port, f_port, b_port = free_ports(3)
    sender = Child(tmp_path / "a.log", "sender", a_file, a_port, f_port, f_pem,
                   CONVERSATIONS, QUOTA, BATCH)
    forwarder = Child(tmp_path / "f.log", "forwarder", f_file, f_port, a_port,
                      f"{a_pem},{b_pem}", b_port)
    receiver = Child(tmp_path / "b.log", "receiver", b_file, b_port, f_port, f_pem)
    rng = random.Random(20261125)
    try:
        forwarder.start()
        receiver.start()
        forwarder.listening()
        receiver.listening()
        sender.start()
        in_flight = []  # at each kill: whether the sender still had messages unacknowledged
        for _ in range(3):  # SIGKILL the forwarder mid-stream, at moments the seed picks
            goal = min(sender.sent() + rng.randint(100, 500), CONVERSATIONS * QUOTA)
            deadline = time.monotonic() + 60
            while sender.sent() < goal and "done" not in sender.lines():
                assert time.monotonic() < deadline, sender.tail()
                assert sender.proc is not None and sender.proc.poll() is None, sender.tail()
                time.sleep(0.02)
            time.sleep(rng.uniform(0, 0.3))
            in_flight.append("drained" not in sender.lines())
            forwarder.kill()
            forwarder.start()
            forwarder.listening()
        assert forwarder.starts == 4 and in_flight == [True] * 3
        try:  # bounds for a machine shared with others, not speed requirements
            sender.wait_for("done", timeout=180)
            sender.wait_for("drained", timeout=180)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{forwarder.stacks()}") from None
        for child in (sender, forwarder, receiver):
            child.stop()
        check_exactly_once(a_file, b_file, f_file)
    finally:
        for child in (sender, forwarder, receiver):
            child.close()
