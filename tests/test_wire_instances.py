"""Two instances in one process, each with its own file and endpoint on 127.0.0.1: a
dialog over TCP (P2-P5, P8, R1.2, R5, R6, C1, C4, C6)."""

from __future__ import annotations

from tests.wire_helpers import CONTRACT, ORDER, drain, instance_pair, wait_for

END_DIALOG = "http://schemas.microsoft.com/SQL/ServiceBroker/EndDialog"


def test_dialog_over_tcp_in_order_with_reply_and_end(tmp_path):
    a, b, shop, stock = instance_pair(tmp_path)
    try:
        conv = shop.begin_dialog("ShopService", "StockService", contract=CONTRACT)
        with shop.transaction():
            for i in range(200):
                conv.send(f"<order n='{i}'/>".encode(), message_type=ORDER)
        got = drain(stock, "StockQueue", 200)
        assert [m.message_body for m in got] == [
            f"<order n='{i}'/>".encode() for i in range(200)]  # P3.1: once, in order
        assert [m.message_sequence_number for m in got] == list(range(200))
        # P5.2: the sender's rows leave once acknowledged; R5: pinned to Stock's identifier
        wait_for(lambda: a.sql("SELECT count(*) FROM sys.transmission_queue").fetchone()[0]
                 == 0, what="the transmission queue to drain")
        row = a.sql("SELECT far_broker_instance, first_unacked_send_sequence, state "
                    "FROM sys.conversation_endpoints").fetchone()
        assert row == (stock.broker_instance, 200, "CO")
        # the reply goes back with Stock's route to ShopService (R6 delivers it at Shop)
        reply = stock.conversation(got[0].conversation_handle)
        reply.send(b"<ok/>", message_type=ORDER)
        reply.end()
        back = drain(shop, "ShopQueue", 2)
        assert [(m.message_type_name, m.message_body) for m in back] == [
            (ORDER, b"<ok/>"), (END_DIALOG, b"")]
        conv.end()
        # DO -> CD when the far side acknowledges the EndDialog (C1)
        wait_for(lambda: b.sql("SELECT state FROM sys.conversation_endpoints").fetchone()[0]
                 == "CD", what="the target side to close")
        assert a.sql("SELECT state FROM sys.conversation_endpoints").fetchone()[0] == "CD"
    finally:
        a.close()
        b.close()
