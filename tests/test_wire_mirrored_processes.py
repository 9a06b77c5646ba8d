"""A mirrored pair in real processes on 127.0.0.1 (tests/wire_child.py, R9): an initiator I
routes StockService to principal P with mirror M. Everything goes to P, nothing to M
(R9.2); P is SIGKILLed and M promoted (started again as PRINCIPAL); the conversations I
begins next, in the same running process, reach M exactly once and in order once I finds P
unreachable and M says it is principal (R9.3); P comes back as MIRROR and gets nothing more.
What P had stays P's: nothing is replicated.

Every process is started by pid and stopped by pid in a ``finally``; every wait is bounded."""

from __future__ import annotations

import os
import signal
import uuid
from pathlib import Path

import pybroker
from tests.process_helpers import Child, certificates, free_ports

CONVERSATIONS = 10
QUOTA = 50  # messages per conversation: 500 in each phase
BATCH = 25


def received(file: Path) -> dict[str, list[tuple[int, int, str]]]:
    """conversation id -> (sequence, status, body) of what StockQueue holds, in order."""
    inst = pybroker.connect(file, worker=False)
    try:
        rows = inst.sql(
            "SELECT e.conversation_id::VARCHAR, m.message_sequence_number, m.status, "
            "decode(m.message_body) FROM queue_contents('Stock', 'StockQueue') AS m "
            "JOIN sys.conversation_endpoints AS e USING (conversation_handle) "
            "ORDER BY m.queuing_order").fetchall()
    finally:
        inst.close()
    got: dict[str, list[tuple[int, int, str]]] = {}
    for cid, seq, status, body in rows:
        got.setdefault(cid, []).append((seq, status, body))
    return got


def test_R9_principal_killed_mirror_promoted_new_conversations_continue_there(tmp_path):
    i_file, p_file, m_file = (tmp_path / f"{n}.duckdb" for n in "ipm")
    i_pem, p_pem, m_pem = certificates(i_file, p_file, m_file)
    i_port, p_port, m_port = free_ports(3)
    broker = str(uuid.uuid4())  # the pair's shared broker identifier
    pair = {"WIRE_CHILD_BROKER": broker}
    sender = Child(tmp_path / "i.log", "sender", i_file, i_port, p_port,
                   f"{p_pem},{m_pem}", CONVERSATIONS, QUOTA, BATCH,
                   env={"WIRE_CHILD_MIRROR_PORT": str(m_port)})
    principal = Child(tmp_path / "p.log", "principal", p_file, p_port, i_port, i_pem,
                      env={**pair, "WIRE_CHILD_PARTNER_PORT": str(m_port)})
    mirror = Child(tmp_path / "m.log", "mirror", m_file, m_port, i_port, i_pem,
                   env={**pair, "WIRE_CHILD_PARTNER_PORT": str(p_port)})
    children = (sender, principal, mirror)
    try:
        principal.start()
        mirror.start()
        principal.listening()
        mirror.listening()
        sender.start()
        sender.wait_for("done", timeout=180)  # bounds for a shared machine, not speed
        sender.wait_for("drained", timeout=180)
        principal.kill()  # SIGKILL: P is gone
        mirror.stop()
        mirror.start("principal", m_file, m_port, i_port, i_pem)  # M promoted
        mirror.listening()
        sender.mark = sender.log.stat().st_size  # what it prints from now on
        assert sender.proc is not None
        os.kill(sender.proc.pid, signal.SIGUSR2)  # as many conversations again
        sender.wait_for("done", timeout=180)
        sender.wait_for("drained", timeout=180)
        principal.start("mirror", p_file, p_port, i_port, i_pem)  # P back, as the mirror
        principal.listening()
        for child in children:
            child.stop()
        at_p, at_m = received(p_file), received(m_file)
        inst = pybroker.connect(i_file, worker=False)
        try:
            sent = inst.sql("SELECT conversation_id::VARCHAR, send_sequence, "
                            "first_unacked_send_sequence, far_broker_instance::VARCHAR "
                            "FROM sys.conversation_endpoints WHERE is_initiator "
                            "ORDER BY conversation_handle").fetchall()
            assert inst.sql("SELECT count(*) FROM sys.transmission_queue").fetchone()[0] == 0
            states = [r[0] for r in inst.sql(
                "SELECT subclass FROM sys.broker_events WHERE event_class = "
                "'Broker:Mirrored Route State Changed' ORDER BY event_id").fetchall()]
        finally:
            inst.close()
        assert sorted((s, u, far) for _, s, u, far in sent) == [
            (QUOTA, QUOTA, broker)] * (2 * CONVERSATIONS)  # all acknowledged, by the pair
        # each conversation went whole to one partner: the first phase's to P, the second's
        # to M; no loss, no duplicate, in order, none held
        assert len(at_p) == len(at_m) == CONVERSATIONS
        assert set(at_p) | set(at_m) == {cid for cid, *_ in sent}
        for cid, messages in [*at_p.items(), *at_m.items()]:
            assert messages == [(n, 1, f"{cid}:{n}") for n in range(QUOTA)], cid
        # first P, then (P unreachable) asked again, then M
        assert states[0] == "PRINCIPAL" and states[-1] == "PRINCIPAL"
        assert "PROBING" in states
    finally:
        for child in children:
            child.close()
