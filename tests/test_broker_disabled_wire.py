"""ALTER DATABASE ... SET DISABLE_BROKER on the receiving side of the wire, between two
instances in one process over 127.0.0.1: a message for a database whose broker is disabled
is not taken; it stays in the sender's sys.transmission_queue, whose transmission_status
says why, and arrives exactly once after ENABLE_BROKER (a reply to the initiator's database
too)."""

from __future__ import annotations

import pybroker
from pybroker.kernel.messaging.arrival_destinations import STATUS_TARGET_BROKER_DISABLED
from tests.wire_helpers import CONTRACT, ORDER, drain, instance_pair, wait_for

WAITING = "SELECT transmission_status FROM sys.transmission_queue"


def _waiting(inst: pybroker.Instance) -> list[tuple[str]]:
    return inst.sql(WAITING).fetchall()


def test_a_disabled_broker_leaves_arrivals_with_the_sender_until_enabled(tmp_path):
    a, b, shop, stock = instance_pair(tmp_path)
    try:
        b.execute("ALTER DATABASE Stock SET DISABLE_BROKER")
        conversation = shop.begin_dialog("ShopService", "StockService", contract=CONTRACT)
        conversation.send(b"<order n='1'/>", message_type=ORDER)
        status = STATUS_TARGET_BROKER_DISABLED.format("Stock")
        assert wait_for(lambda: _waiting(a) == [(status,)] and True,
                        what="the sender's transmission queue to say why") is True
        assert stock.receive("StockQueue", timeout=0) == []
        # the receiver records each refusal as a broker event, written apart from the notice
        # that reached the sender: wait for it too
        assert wait_for(lambda: b.sql(
            "SELECT count(*) FROM sys.broker_events WHERE event_class = "
            "'Broker:Message Undeliverable' AND description = ?",
            [status]).fetchone()[0] >= 1 and True,
            what="the refusal's broker event at the receiver") is True
        b.execute("ALTER DATABASE Stock SET ENABLE_BROKER")
        [arrived] = drain(stock, "StockQueue", 1)
        assert arrived.message_body == b"<order n='1'/>"
        wait_for(lambda: _waiting(a) == [], what="the sender's transmission queue to empty")
        assert stock.receive("StockQueue", timeout=0.5) == []  # exactly once
        # the reply, to the initiator's database with its broker disabled, waits at B
        a.execute("ALTER DATABASE Shop SET DISABLE_BROKER")
        stock.conversation(arrived.conversation_handle).send(b"reply", message_type=ORDER)
        back = STATUS_TARGET_BROKER_DISABLED.format("Shop")
        wait_for(lambda: _waiting(b) == [(back,)], what="the reply to wait at B")
        a.execute("ALTER DATABASE Shop SET ENABLE_BROKER")
        [reply] = drain(shop, "ShopQueue", 1)
        assert (reply.message_body, reply.conversation_handle) == (
            b"reply", conversation.handle)
        wait_for(lambda: _waiting(b) == [], what="B's transmission queue to empty")
        assert shop.receive("ShopQueue", timeout=0.5) == []
    finally:
        a.close()
        b.close()
