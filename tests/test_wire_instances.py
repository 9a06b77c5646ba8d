"""Two instances in one process, each with its own file and endpoint on 127.0.0.1: a
dialog over TCP (P2-P5, P8, R1.2, R5, R6, C1, C4, C6)."""

from __future__ import annotations

import pytest

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


def test_endpoint_twice_or_on_a_taken_port_is_refused(tmp_path):
    import socket

    import pybroker

    with pybroker.connect(tmp_path / "x.duckdb") as inst:
        endpoint = inst.start_endpoint(0)
        assert endpoint.address == f"tcp://127.0.0.1:{endpoint.port}" and endpoint.port > 0
        with pytest.raises(pybroker.WireError, match="already started"):
            inst.start_endpoint(0)
        endpoint.close()
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            with pytest.raises(pybroker.WireError, match=r"port taken|in use"):
                inst.start_endpoint(taken.getsockname()[1])
        again = inst.start_endpoint(0)  # a closed endpoint can be started anew
        assert not again.is_closed
    assert again.is_closed  # Instance.close() closes it too


def test_idle_connection_closes_and_reopens_on_demand(tmp_path):
    a, b, shop, stock = instance_pair(tmp_path, idle_timeout=0.3)
    try:
        conv = shop.begin_dialog("ShopService", "StockService", contract=CONTRACT)
        conv.send(b"<one/>", message_type=ORDER)
        drain(stock, "StockQueue", 1)
        assert len(a.endpoint.connections()) == 1  # one connection, opened on demand
        wait_for(lambda: not a.endpoint.connections(), what="the idle connection to close")
        conv.send(b"<two/>", message_type=ORDER)  # P2: a new connection for the same dialog
        assert drain(stock, "StockQueue", 1)[0].message_body == b"<two/>"
        a.run_pending()
        kinds = [r[0] for r in a.sql("SELECT subclass FROM sys.broker_events").fetchall()]
        assert kinds.count("Connecting") == 2 and "Closed" in kinds
        b.run_pending()
        reasons = [r[0] for inst in (a, b) for r in inst.sql(
            "SELECT description FROM sys.broker_events WHERE subclass = 'Closed'").fetchall()]
        assert any("idle for 0.3 s" in r for r in reasons)  # whichever side closed first
    finally:
        a.close()
        b.close()


def test_connections_view_counts_what_crossed(tmp_path):
    # retry_scale 1: no resend within 4 s, so the counts are exact even on a busy machine
    a, b, shop, stock = instance_pair(tmp_path, retry_scale=1.0)
    try:
        conv = shop.begin_dialog("ShopService", "StockService", contract=CONTRACT)
        with shop.transaction():
            for _ in range(30):
                conv.send(b"x" * 100, message_type=ORDER)
        drain(stock, "StockQueue", 30)
        wait_for(lambda: a.sql("SELECT count(*) FROM sys.transmission_queue").fetchone()[0]
                 == 0, what="acknowledgements")

        def view():
            rows = a.sql("SELECT peer_address, state_desc, is_accept, principal_name, "
                         "login_state_desc, total_fragments_sent, total_bytes_sent, "
                         "authentication_method FROM sys.dm_broker_connections").fetchall()
            return rows if rows and rows[0][5] >= 30 else None

        (row,) = wait_for(view, what="sys.dm_broker_connections to catch up (<= 1 s)")
        assert row[0] == b.endpoint.address and row[1:5] == ("CONNECTED", False, "B",
                                                               "ONLINE")
        assert row[5] == 30 and row[6] > 30 * 100 and row[7] == "CERTIFICATE"
    finally:
        a.close()
        b.close()


def test_without_tls_peers_still_must_be_trusted_and_frames_signed(tmp_path):
    """ENCRYPTION = DISABLED: no TLS, the HELLO names the certificate and every frame's MAC
    proves it (P6)."""
    a, b, shop, stock = instance_pair(tmp_path, encryption=False)
    try:
        conv = shop.begin_dialog("ShopService", "StockService", contract=CONTRACT)
        conv.send(b"<plain/>", message_type=ORDER)
        assert drain(stock, "StockQueue", 1)[0].message_body == b"<plain/>"
        row = wait_for(lambda: a.sql("SELECT principal_name, encryption_algorithm_desc "
                                     "FROM sys.dm_broker_connections").fetchone(),
                       what="the connection row")
        assert row == ("B", "NONE")
        b.untrust("A")  # A's connection is closed; a new one is refused
        conv.send(b"<refused/>", message_type=ORDER)

        def refused():
            b.run_pending()
            return b.sql("SELECT count(*) FROM sys.broker_events WHERE subclass = "
                         "'Authentication Failure'").fetchone()[0]

        wait_for(refused, what="an authentication failure at B")
        assert stock.receive("StockQueue", max_messages=10) == []
    finally:
        a.close()
        b.close()
