"""``pybroker trace`` / ``pybroker.trace``: one conversation followed across instances by
its conversation_id: where each message is and why, the routing at each hop, the events."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import pybroker
from pybroker.apps.diagnose.trace import UnknownConversationError
from tests.cli_helpers import call
from tests.test_wire_forwarding_instances import close, trio
from tests.wire_helpers import CONTRACT, ORDER, drain, wait_for


def _unacknowledged(inst: pybroker.Instance) -> int:
    return inst.sql("SELECT count(*) FROM sys.transmission_queue").fetchone()[0]


def test_through_a_forwarder_to_a_stopped_target_then_after_it_starts(tmp_path):
    a, f, b, shop, stock = trio(tmp_path)
    try:
        conv = shop.begin_dialog("ShopService", "StockService", contract=CONTRACT)
        conv.send(b"<one/>", message_type=ORDER)
        drain(stock, "StockQueue", 1)
        wait_for(lambda: _unacknowledged(a) == 0, what="the first acknowledgement")
        port = b.endpoint.port
        b.endpoint.close()  # the target stops: F cannot pass message 1 on
        conv.send(b"<two/>", message_type=ORDER)
        wait_for(lambda: f.sql("SELECT count(*) FROM sys.broker_events WHERE event_class = "
                               "'Broker:Forwarded Message Dropped'").fetchone()[0],
                 what="F's drop of message 1")
        target_handle = b.sql("SELECT conversation_handle FROM sys.conversation_endpoints"
                              ).fetchone()[0]
        result = pybroker.trace(target_handle, [a, f, b])  # the other side's handle
        assert result.conversation_id == conv.conversation_id
        first, second = result.messages
        assert (first.sequence, first.place, first.acknowledged) == (0, "received", True)
        assert (second.place, second.where, second.acknowledged) == (
            "transmission queue", f"{a.path}/Shop", False)
        assert "next hop unreachable" in second.last_event  # why: F's event
        assert str(f.path) in second.last_event
        hops = [(h.instance, h.origin, h.outcome, h.route) for h in result.hops
                if h.direction == "initiator to target"]
        assert hops[:2] == [(str(a.path), "Shop", "send", "ToStock"),
                            (str(f.path), "outside", "send", "OnToStock")]
        assert [h.next_instance for h in result.hops][:1] == [str(f.path)]
        times = [t.time for t in result.timeline]
        assert times == sorted(times)
        assert any(t.kind == "event" and t.instance == str(f.path) and t.sequence == 1
                   for t in result.timeline)

        b.start_endpoint(port)  # the target starts again: the sender's retry gets through
        drain(stock, "StockQueue", 1)
        wait_for(lambda: _unacknowledged(a) == 0, what="the second acknowledgement")
        after = pybroker.trace(conv.handle, [a, f, b])
        assert [(m.place, m.acknowledged, m.arrived) for m in after.messages] == [
            ("received", True, True)] * 2
        assert [h.outcome for h in after.hops if h.direction == "initiator to target"] == [
            "send", "send", "deliver"]  # B, listening again, is known by its address
    finally:
        close(a, f, b)


@pytest.fixture
def local(tmp_path: Path) -> tuple[Path, str]:
    """One file, one conversation inside it: message 0 received, message 1 in the queue."""
    file = tmp_path / "local.duckdb"
    with pybroker.connect(file, worker=False) as inst:
        db = inst.create_database("App")
        db.create_queue("InitQueue")
        db.create_service("Init", queue="InitQueue")
        db.create_queue("TargetQueue")
        db.create_service("Target", queue="TargetQueue", contracts=["DEFAULT"])
        conv = db.begin_dialog("Init", "Target")
        conv.send(b"first")
        assert len(db.receive("TargetQueue", max_messages=1)) == 1
        conv.send(b"second")
        return file, conv.handle


def test_a_local_conversation_as_text_and_as_json(local, capsys):
    file, handle = local
    code, out, _ = call(["trace", handle, file], capsys)
    assert code == 0
    assert "arrived in queue TargetQueue (READY)" in out
    assert f"was received by {file}/App" in out
    code, out, _ = call(["trace", handle, file, "--format", "json"], capsys)
    report = json.loads(out)
    assert code == 0 and report["schema"] == 1
    assert [(m["sequence"], m["place"], m["where"]) for m in report["messages"]] == [
        (0, "received", f"{file}/App"), (1, "queue", f"{file}/App/TargetQueue")]
    assert {e["is_initiator"] for e in report["endpoints"]} == {True, False}
    assert report["hops"][0]["outcome"] == "deliver"


def test_an_unknown_or_malformed_handle(local, capsys):
    file, _ = local
    unknown = "00000000-0000-0000-0000-000000000001"
    with pytest.raises(UnknownConversationError, match=unknown):
        pybroker.trace(unknown, [file])
    code, _, err = call(["trace", unknown, file], capsys)
    assert code == 2 and err.count("\n") == 1 and "no conversation endpoint" in err
    code, _, err = call(["trace", "not-a-handle", file], capsys)
    assert code == 2 and "GUID" in err
