"""C3 RETENTION over the wire: a queue with RETENTION = ON keeps what its service sent (status
3, RETAINED_SENT) whether the far side is in this instance or across TCP, from the moment
the SEND commits, and END CONVERSATION takes a side's retained messages away, as it does
for a conversation inside one instance."""

from __future__ import annotations

import pybroker
from pybroker.core.conversation.model import STATUS_NO_TRANSPORT
from tests.wire_helpers import CONTRACT, ORDER, drain, instance_pair, wait_for

END_DIALOG = "http://schemas.microsoft.com/SQL/ServiceBroker/EndDialog"

RETAINED = ("SELECT database_name, queue_name, status, status_desc, conversation_handle, "
            "message_sequence_number, service_name, service_contract_name, message_type_name, "
            "validation, message_body FROM sys.queue_messages ORDER BY queuing_order")


def test_c3_retained_sent_messages_over_tcp_both_ways_until_each_side_ends(tmp_path):
    a, b, shop, stock = instance_pair(tmp_path)
    try:
        shop.alter_queue("ShopQueue", retention=True)
        stock.alter_queue("StockQueue", retention=True)
        conv = shop.begin_dialog("ShopService", "StockService", contract=CONTRACT)
        bodies = [f"<order n='{i}'/>".encode() for i in range(5)]
        with shop.transaction():
            for body in bodies[:3]:
                conv.send(body, message_type=ORDER)
        # kept when the SEND commits, whether or not the far side has them yet
        assert a.sql(RETAINED).fetchall() == [
            ("Shop", "ShopQueue", 3, "RETAINED_SENT", conv.handle, i, "ShopService",
             CONTRACT, ORDER, "N", bodies[i]) for i in range(3)]
        for body in bodies[3:]:
            conv.send(body, message_type=ORDER)
        got = drain(stock, "StockQueue", 5)
        assert [m.message_body for m in got] == bodies
        assert a.sql(RETAINED).fetchall() == [
            ("Shop", "ShopQueue", 3, "RETAINED_SENT", conv.handle, i, "ShopService",
             CONTRACT, ORDER, "N", bodies[i]) for i in range(5)]  # each once, in order
        wait_for(lambda: a.sql("SELECT count(*) FROM sys.transmission_queue").fetchone()[0]
                 == 0, what="acknowledgements")
        assert len(a.sql(RETAINED).fetchall()) == 5  # an acknowledgement keeps them

        # the target's replies: received messages stay (status 0), sent ones too (status 3)
        far = got[0].conversation_handle
        reply = stock.conversation(far)
        reply.send(b"<ok/>", message_type=ORDER)
        reply.send(b"<shipped/>", message_type=ORDER)
        assert [r[2:6] + r[8:] for r in b.sql(RETAINED).fetchall()] == [
            *[(0, "RETAINED", far, i, ORDER, "N", bodies[i]) for i in range(5)],
            (3, "RETAINED_SENT", far, 0, ORDER, "N", b"<ok/>"),
            (3, "RETAINED_SENT", far, 1, ORDER, "N", b"<shipped/>")]
        back = drain(shop, "ShopQueue", 2)
        assert [m.message_body for m in back] == [b"<ok/>", b"<shipped/>"]

        # END takes this side's messages away (received and sent); the far side keeps its
        # own, and its EndDialog arrives (as for a conversation inside one instance)
        reply.end()
        assert b.sql(RETAINED).fetchall() == []
        (end,) = drain(shop, "ShopQueue", 1)
        assert end.message_type_name == END_DIALOG
        assert [r[2] for r in a.sql(RETAINED).fetchall()] == [3] * 5 + [0, 0, 0]
        conv.end()
        assert a.sql(RETAINED).fetchall() == []
        wait_for(lambda: b.sql("SELECT state FROM sys.conversation_endpoints").fetchone()[0]
                 == "CD", what="the target side to close")
    finally:
        a.close()
        b.close()


def test_c3_without_retention_nothing_sent_stays_over_tcp(tmp_path):
    a, b, shop, stock = instance_pair(tmp_path)
    try:
        conv = shop.begin_dialog("ShopService", "StockService", contract=CONTRACT)
        conv.send(b"<one/>", message_type=ORDER)
        drain(stock, "StockQueue", 1)
        assert a.sql(RETAINED).fetchall() == []
        assert b.sql(RETAINED).fetchall() == []
    finally:
        a.close()
        b.close()


def test_c3_messages_that_waited_for_the_endpoint_are_retained_when_they_leave(tmp_path):
    """Messages that wait in the transmission queue (no endpoint started) are kept when
    they leave for the far side, as a delivery inside the instance that waited for a
    disabled queue is."""
    a, b, shop, stock = instance_pair(tmp_path)
    try:
        shop.alter_queue("ShopQueue", retention=True)
        a.endpoint.close()
        conv = shop.begin_dialog("ShopService", "StockService", contract=CONTRACT)
        conv.send(b"<a/>", message_type=ORDER)
        conv.send(b"<b/>", message_type=ORDER)
        assert a.sql(RETAINED).fetchall() == []  # not sent: they wait, with a status
        assert a.sql("SELECT transmission_status FROM sys.transmission_queue").fetchall() == [
            (STATUS_NO_TRANSPORT,)] * 2
        a.start_endpoint(0)  # B's route back to A is stale: no replies are needed here
        assert [m.message_body for m in drain(stock, "StockQueue", 2)] == [b"<a/>", b"<b/>"]
        rows = a.sql(RETAINED).fetchall()
        assert [(r[2], r[4], r[5], r[10]) for r in rows] == [
            (3, conv.handle, 0, b"<a/>"), (3, conv.handle, 1, b"<b/>")]
    finally:
        a.close()
        b.close()


def test_c3_messages_in_flight_at_a_restart_go_again_and_are_kept_once(tmp_path):
    a, b, shop, stock = instance_pair(tmp_path)
    try:
        shop.alter_queue("ShopQueue", retention=True)
        b.endpoint.close()  # A's messages leave but nothing acknowledges them
        conv = shop.begin_dialog("ShopService", "StockService", contract=CONTRACT)
        conv.send(b"<a/>", message_type=ORDER)
        conv.send(b"<b/>", message_type=ORDER)
        kept = a.sql(RETAINED).fetchall()
        assert [(r[2], r[5], r[10]) for r in kept] == [(3, 0, b"<a/>"), (3, 1, b"<b/>")]
        a.close()
        a = pybroker.connect(tmp_path / "a.duckdb", retry_scale=0.01)
        eb = b.start_endpoint(0)
        a.database("Shop").alter_route("ToStock", address=eb.address)
        a.start_endpoint(0)  # what was in flight goes again
        assert [m.message_body for m in drain(stock, "StockQueue", 2)] == [b"<a/>", b"<b/>"]
        wait_for(lambda: a.sql("SELECT count(*) FROM sys.transmission_queue").fetchone()[0]
                 == 0, what="acknowledgements")
        assert a.sql(RETAINED).fetchall() == kept  # once each, as they were
    finally:
        a.close()
        b.close()
