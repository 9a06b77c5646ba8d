"""Two (or three) instances in one process, each with its own file and endpoint on
127.0.0.1: what the wire does when the far side cannot or will not take a message (P4, P6,
P8, R5, C4), and a 50 MB message in fragments."""

from __future__ import annotations

import pybroker
from pybroker.devtools.chaos.ports import free_port
from pybroker.kernel.messaging.arrival_destinations import (
    STATUS_BROKER_NOT_HERE,
    STATUS_FORWARDING_OFF,
)
from tests.wire_helpers import CONTRACT, ORDER, drain, instance_pair, wait_for

ERROR = "http://schemas.microsoft.com/SQL/ServiceBroker/Error"
QUEUE_DISABLED = "The destination queue is disabled."


def count(inst: pybroker.Instance, query: str) -> int:
    return inst.sql(query).fetchone()[0]


def tx_rows(inst: pybroker.Instance) -> list[tuple]:
    return inst.sql("SELECT message_sequence_number, transmission_status, is_inbound "
                    "FROM sys.transmission_queue ORDER BY message_sequence_number").fetchall()


def events(inst: pybroker.Instance, subclass: str) -> list[str]:
    """Broker events are written with the next unit of work or connection snapshot."""
    return [d for (d,) in inst.sql(
        "SELECT description FROM sys.broker_events WHERE subclass = ? ORDER BY event_id",
        [subclass]).fetchall()]


def test_a_50_mb_message_crosses_in_fragments(tmp_path):
    a, b, shop, stock = instance_pair(tmp_path, fragment_size=512 * 1024, retry_scale=1.0)
    try:
        body = bytes(range(256)) * (50 * 2**20 // 256)  # 50 MiB: 100 fragments
        conv = shop.begin_dialog("ShopService", "StockService", contract=CONTRACT)
        conv.send(b"<first/>", message_type=ORDER)
        conv.send(body, message_type=ORDER)
        conv.send(b"<after/>", message_type=ORDER)
        got = drain(stock, "StockQueue", 3, timeout=120)
        assert [m.message_sequence_number for m in got] == [0, 1, 2]
        assert got[1].message_body == body
        assert (got[0].message_body, got[2].message_body) == (b"<first/>", b"<after/>")
        assert count(b, "SELECT count(*) FROM main.message_fragments") == 0
        wait_for(lambda: not tx_rows(a), what="the sender's rows to be acknowledged")
        assert b.sql("SELECT receive_sequence, receive_sequence_frag "
                     "FROM sys.conversation_endpoints").fetchone() == (3, 0)
    finally:
        a.close()
        b.close()


def test_an_untrusted_peer_is_refused_both_ways_until_trusted(tmp_path):
    a = pybroker.connect(tmp_path / "a.duckdb", retry_scale=0.01)
    b = pybroker.connect(tmp_path / "b.duckdb", retry_scale=0.01)
    try:
        a.trust("B", b.certificate)  # A trusts B; B does not know A yet
        ea, eb = a.start_endpoint(0), b.start_endpoint(0)
        shop, stock = a.create_database("Shop"), b.create_database("Stock")
        for db in (shop, stock):
            db.create_message_type(ORDER)
            db.create_contract(CONTRACT, {ORDER: "ANY"})
        shop.create_queue("ShopQueue")
        shop.create_service("ShopService", queue="ShopQueue")
        stock.create_queue("StockQueue")
        stock.create_service("StockService", queue="StockQueue", contracts=[CONTRACT])
        shop.create_route("ToStock", service_name="StockService", address=eb.address)
        stock.create_route("ToShop", service_name="ShopService", address=ea.address)
        conv = shop.begin_dialog("ShopService", "StockService", contract=CONTRACT)
        conv.send(b"<order/>", message_type=ORDER)
        # B refuses A's certificate; A says why in transmission_status and keeps retrying
        wait_for(lambda: events(b, "Authentication Failure"), what="B's refusal event")
        status = wait_for(lambda: [s for _, s, _ in tx_rows(a)
                                   if s.startswith("Connection attempt failed")],
                          what="A's transmission_status")[0]
        assert "did not accept this instance or is not trusted here" in status, status
        # both sides record the refusal: every failed attempt of A is a login failure
        wait_for(lambda: len(events(a, "Connecting")) >= 3, what="three attempts")
        attempts, refused = len(events(a, "Connecting")), len(events(a, "Authentication Failure"))
        assert refused >= attempts - 1, (attempts, refused)
        assert count(b, "SELECT count(*) FROM sys.queue_messages") == 0
        assert count(b, "SELECT count(*) FROM sys.conversation_endpoints") == 0
        # B's reply direction: B trusts nobody, so it refuses A's certificate as a client too
        b.trust("A", a.certificate)
        got = drain(stock, "StockQueue", 1)
        assert got[0].message_body == b"<order/>"
        wait_for(lambda: not tx_rows(a), what="A's row to be acknowledged")
        # A stops trusting B: B's reply cannot reach A, and A's side records it
        a.untrust("B")
        stock.conversation(got[0].conversation_handle).send(b"<ok/>", message_type=ORDER)
        wait_for(lambda: [s for _, s, _ in tx_rows(b)
                          if s.startswith("Connection attempt failed")],
                 what="B's transmission_status once A no longer trusts it")
        assert shop.receive("ShopQueue", timeout=0.5) == []
        a.trust("B", b.certificate)
        assert [m.message_body for m in drain(shop, "ShopQueue", 1)] == [b"<ok/>"]
    finally:
        a.close()
        b.close()


def test_a_queue_off_at_the_target_holds_arrivals_until_on(tmp_path):
    a, b, shop, stock = instance_pair(tmp_path)
    try:
        stock.alter_queue("StockQueue", status=False)
        conv = shop.begin_dialog("ShopService", "StockService", contract=CONTRACT)
        with shop.transaction():
            for i in range(5):
                conv.send(f"<order n='{i}'/>".encode(), message_type=ORDER)
        # P8: the arrivals wait in the receiving database's transmission queue; the
        # sender's rows are acknowledged (gone)
        wait_for(lambda: len(tx_rows(b)) == 5, what="the inbound rows at the target")
        assert tx_rows(b) == [(i, QUEUE_DISABLED, True) for i in range(5)]
        wait_for(lambda: not tx_rows(a), what="the sender's rows to be acknowledged")
        assert count(b, "SELECT count(*) FROM sys.queue_messages") == 0
        conv.send(b"<order n='5'/>", message_type=ORDER)  # one more while it is OFF
        wait_for(lambda: len(tx_rows(b)) == 6, what="the sixth inbound row")
        stock.alter_queue("StockQueue", status=True)
        got = drain(stock, "StockQueue", 6)
        assert [(m.message_sequence_number, m.message_body) for m in got] == [
            (i, f"<order n='{i}'/>".encode()) for i in range(6)]
        assert tx_rows(b) == []
        conv.send(b"<order n='6'/>", message_type=ORDER)  # and ON again: straight in
        assert [m.message_sequence_number for m in drain(stock, "StockQueue", 1)] == [6]
    finally:
        a.close()
        b.close()


def test_no_such_service_at_the_target_is_said_not_silently_dropped(tmp_path):
    a, b, shop, stock = instance_pair(tmp_path)
    try:
        eb = b.endpoint
        shop.create_route("ToNowhere", service_name="NoService", address=eb.address)
        conv = shop.begin_dialog("ShopService", "NoService", contract=CONTRACT)
        conv.send(b"<lost?/>", message_type=ORDER)
        # the target records why and tells the sender, who keeps the row and retries
        wait_for(lambda: tx_rows(a) == [(0, STATUS_FORWARDING_OFF, False)],
                 what="the target's reason in the sender's transmission_status")
        wait_for(lambda: STATUS_FORWARDING_OFF in events(b, "refused"),
                 what="the target's broker event")
        assert conv.state == "CO"
        # the service appears at the target: the retry delivers the message
        stock.create_queue("NoQueue")
        stock.create_service("NoService", queue="NoQueue", contracts=[CONTRACT])
        got = drain(stock, "NoQueue", 1)
        assert got[0].message_body == b"<lost?/>"
        wait_for(lambda: not tx_rows(a), what="the row to be acknowledged")
    finally:
        a.close()
        b.close()


def test_a_broker_identifier_not_at_the_target_is_said(tmp_path):
    a, b, shop, _ = instance_pair(tmp_path)
    try:
        elsewhere = "4c1c6b2e-0000-4000-8000-000000000001"
        conv = shop.begin_dialog("ShopService", "StockService", contract=CONTRACT,
                                 broker_instance=elsewhere)
        conv.send(b"<order/>", message_type=ORDER)
        status = wait_for(lambda: [s for _, s, _ in tx_rows(a) if s],
                          what="the target's reason")[0]
        assert status == STATUS_BROKER_NOT_HERE.format(elsewhere), status
        wait_for(lambda: events(b, "refused"), what="the target's broker event")
        assert count(b, "SELECT count(*) FROM sys.conversation_endpoints") == 0
        assert count(b, "SELECT count(*) FROM sys.queue_messages") == 0
    finally:
        a.close()
        b.close()


def test_a_contract_the_target_does_not_accept_ends_the_dialog_with_8408(tmp_path):
    a, b, shop, _ = instance_pair(tmp_path)
    try:
        conv = shop.begin_dialog("ShopService", "StockService")  # DEFAULT: not accepted
        conv.send(b"<order/>")
        got = drain(shop, "ShopQueue", 1)
        assert got[0].message_type_name == ERROR
        assert b"-8408" in got[0].message_body or b"8408" in got[0].message_body
        assert conv.state == "ER"
        assert a.sql("SELECT error_code FROM sys.conversation_endpoints").fetchone()[0] == -8408
        assert tx_rows(a) == []  # nothing left to retry
        wait_for(lambda: events(b, "refused"), what="the target's broker event")
        assert count(b, "SELECT count(*) FROM sys.conversation_endpoints") == 0
        assert count(b, "SELECT count(*) FROM sys.queue_messages") == 0
    finally:
        a.close()
        b.close()


def test_a_peer_that_is_down_shows_in_transmission_status(tmp_path):
    a = pybroker.connect(tmp_path / "a.duckdb", retry_scale=0.01)
    try:
        a.start_endpoint(0)
        shop = a.create_database("Shop")
        shop.create_message_type(ORDER)
        shop.create_contract(CONTRACT, {ORDER: "ANY"})
        shop.create_queue("ShopQueue")
        shop.create_service("ShopService", queue="ShopQueue")
        down = free_port()  # nothing listens there
        shop.create_route("ToStock", service_name="StockService",
                          address=f"tcp://127.0.0.1:{down}")
        conv = shop.begin_dialog("ShopService", "StockService", contract=CONTRACT)
        conv.send(b"<order/>", message_type=ORDER)
        status = wait_for(lambda: [s for _, s, _ in tx_rows(a) if s],
                          what="the connection failure")[0]
        assert status.startswith("Connection attempt failed with error: '"), status
        assert status.endswith("(Connection refused.)'."), status
        assert wait_for(lambda: events(a, "Connect Failed"), what="the event")
        assert conv.state == "CO"
    finally:
        a.close()


def test_a_reply_from_another_instance_to_a_pinned_conversation_gets_8495(tmp_path):
    """R5: the first acknowledgement pins the conversation to Stock's broker identifier.
    A copy of B's file with a new identifier for Stock (as a restored backup gets with
    NEW_BROKER) holds the same target endpoint and the same certificate; its reply is
    refused with -8495, and the pinned conversation goes on with B."""
    import shutil
    import uuid

    import duckdb

    a, b, shop, stock = instance_pair(tmp_path)
    c = None
    try:
        conv = shop.begin_dialog("ShopService", "StockService", contract=CONTRACT)
        conv.send(b"<order/>", message_type=ORDER)
        handle = drain(stock, "StockQueue", 1)[0].conversation_handle
        wait_for(lambda: not tx_rows(a), what="the acknowledgement")
        assert a.sql("SELECT far_broker_instance FROM sys.conversation_endpoints"
                     ).fetchone()[0] == stock.broker_instance
        b.close()
        shutil.copy(tmp_path / "b.duckdb", tmp_path / "c.duckdb")
        with duckdb.connect(str(tmp_path / "c.duckdb")) as raw:
            raw.execute("UPDATE databases SET service_broker_guid = ? WHERE name = 'Stock'",
                        [str(uuid.uuid4())])
        c = pybroker.connect(tmp_path / "c.duckdb", retry_scale=0.01)
        c.start_endpoint(0)
        copy = c.database("Stock")
        assert copy.broker_instance != stock.broker_instance
        copy.conversation(handle).send(b"<imposter/>", message_type=ORDER)
        got = drain(copy, "StockQueue", 1)
        assert got[0].message_type_name == ERROR
        assert b"-8495" in got[0].message_body, got[0].message_body
        assert c.sql("SELECT state, error_code FROM sys.conversation_endpoints"
                     ).fetchone() == ("ER", -8495)
        wait_for(lambda: not tx_rows(c), what="the copy's row to be dropped")
        wait_for(lambda: events(a, "refused"), what="A's broker event")
        assert shop.receive("ShopQueue", timeout=0.2) == []
        assert conv.state == "CO"
        c.close()
        c = None
        # the instance the conversation is pinned to still talks with A
        b = pybroker.connect(tmp_path / "b.duckdb", retry_scale=0.01)
        b.start_endpoint(0)
        b.database("Stock").conversation(handle).send(b"<ok/>", message_type=ORDER)
        assert [m.message_body for m in drain(shop, "ShopQueue", 1)] == [b"<ok/>"]
    finally:
        a.close()
        b.close()
        if c is not None:
            c.close()


def test_an_arrival_just_after_a_queue_turns_on_stays_behind_those_that_waited(tmp_path):
    """P8: ALTER QUEUE ... STATUS = ON commits, then the waiting arrivals are released. A
    message that arrives in between goes into the queue after them, not ahead."""
    a, b, shop, stock = instance_pair(tmp_path)
    try:
        stock.alter_queue("StockQueue", status=False)
        conv = shop.begin_dialog("ShopService", "StockService", contract=CONTRACT)
        with shop.transaction():
            for i in range(3):
                conv.send(f"{i}", message_type=ORDER)
        wait_for(lambda: len(tx_rows(b)) == 3, what="the inbound rows")
        messaging = b.kernel.messaging
        release = messaging.after_catalog_write

        def arrival_first() -> None:  # the writer thread gets in before the release
            conv.send(b"3", message_type=ORDER)
            wait_for(lambda: b.sql("SELECT receive_sequence FROM sys.conversation_endpoints"
                                   ).fetchone()[0] == 4, what="the arrival of message 3")
            release()

        messaging.after_catalog_write = arrival_first
        stock.alter_queue("StockQueue", status=True)
        messaging.after_catalog_write = release
        got = drain(stock, "StockQueue", 4)
        assert [m.message_body for m in got] == [b"0", b"1", b"2", b"3"]
        assert tx_rows(b) == []
    finally:
        a.close()
        b.close()
