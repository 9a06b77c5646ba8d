"""Forwarding between instances in one process (R7, R3.6): A -> F -> B over TCP on
127.0.0.1, F routing with msdb's table; acknowledgements and notices back through F; loops
end; the memory bound; R7.2."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pybroker
from tests.wire_helpers import CONTRACT, ORDER, define_objects, drain, wait_for

DROPPED = "Broker:Forwarded Message Dropped"


def _instances(tmp_path: Path, names: list[str], **endpoint: Any) -> list[pybroker.Instance]:
    insts = [pybroker.connect(tmp_path / f"{n}.duckdb", retry_scale=0.01) for n in names]
    for i, inst in enumerate(insts):
        for j, other in enumerate(insts):
            if i != j:
                inst.trust(names[j], other.certificate)
    for inst in insts:
        inst.start_endpoint(0, **endpoint)
    return insts


def trio(tmp_path: Path, **endpoint: Any) -> tuple[pybroker.Instance, ...]:
    """A holds Shop (ShopService), B holds Stock (StockService), F holds no service and
    forwards both ways: A and B route each other's service to F, F's msdb routes them on."""
    a, f, b = _instances(tmp_path, ["a", "f", "b"], **endpoint)
    shop, stock = a.create_database("Shop"), b.create_database("Stock")
    for db in (shop, stock):
        define_objects(db)
    shop.create_queue("ShopQueue")
    shop.create_service("ShopService", queue="ShopQueue")
    stock.create_queue("StockQueue")
    stock.create_service("StockService", queue="StockQueue", contracts=[CONTRACT])
    shop.create_route("ToStock", service_name="StockService", address=f.endpoint.address)
    stock.create_route("ToShop", service_name="ShopService", address=f.endpoint.address)
    msdb = f.database("msdb")
    msdb.create_route("OnToStock", service_name="StockService", address=b.endpoint.address)
    msdb.create_route("OnToShop", service_name="ShopService", address=a.endpoint.address)
    f.forwarding = True
    return a, f, b, shop, stock


def events(inst: pybroker.Instance, event_class: str) -> list[tuple[str, str]]:
    inst.run_pending()  # broker events are written with the next unit of work
    return inst.sql("SELECT subclass, description FROM sys.broker_events WHERE event_class = ?",
                    [event_class]).fetchall()


def status(inst: pybroker.Instance) -> list[str]:
    return [r[0] for r in inst.sql(
        "SELECT transmission_status FROM sys.transmission_queue").fetchall()]


def close(*insts: pybroker.Instance) -> None:
    for inst in insts:
        inst.close()


def test_R7_3_forwarded_once_in_order_fragment_by_fragment_and_acknowledged_through_f(
        tmp_path):
    a, f, b, shop, stock = trio(tmp_path, fragment_size=4096)
    try:
        conv = shop.begin_dialog("ShopService", "StockService", contract=CONTRACT)
        bodies = [f"<order n='{i}'/>".encode() for i in range(100)] + [b"x" * 20_000]
        with shop.transaction():
            for body in bodies:
                conv.send(body, message_type=ORDER)
        got = drain(stock, "StockQueue", len(bodies))
        assert [m.message_body for m in got] == bodies  # once, in order; 20 kB in 5 pieces
        # only B acknowledges, through F: A's transmission queue drains, pinned to Stock
        wait_for(lambda: status(a) == [], what="A's transmission queue to drain")
        assert a.sql("SELECT far_broker_instance FROM sys.conversation_endpoints"
                     ).fetchone()[0] == stock.broker_instance
        # the reply goes back through F too (B routes ShopService to F)
        stock.conversation(got[0].conversation_handle).send(b"<ok/>", message_type=ORDER)
        assert drain(shop, "ShopQueue", 1)[0].message_body == b"<ok/>"
        wait_for(lambda: status(b) == [], what="B's transmission queue to drain")
        # F wrote nothing of the dialog: no endpoint, no message, no fragment
        for view in ("sys.conversation_endpoints", "sys.transmission_queue"):
            assert f.sql(f"SELECT count(*) FROM {view}").fetchone()[0] == 0
        assert f.sql("SELECT count(*) FROM message_fragments").fetchone()[0] == 0
        assert f.endpoint.transport.forwarder.held_bytes == 0  # released once written
    finally:
        close(a, f, b)


def test_R7_no_such_service_notice_returns_to_the_sender_through_f(tmp_path):
    a, f, b, shop, _stock = trio(tmp_path)
    try:
        shop.create_route("ToNowhere", service_name="NoSuchService",
                          address=f.endpoint.address)
        f.database("msdb").create_route("OnToNowhere", service_name="NoSuchService",
                                        address=b.endpoint.address)
        conv = shop.begin_dialog("ShopService", "NoSuchService", contract=CONTRACT)
        conv.send(b"<lost?/>", message_type=ORDER)
        text = wait_for(lambda: [s for s in status(a) if "no service of that name" in s],
                        what="B's notice at A")
        assert "message forwarding is off there" in text[0]  # B's words, relayed by F
        assert b.sql("SELECT count(*) FROM sys.conversation_endpoints").fetchone()[0] == 0
    finally:
        close(a, f, b)


def test_R3_6_forwarding_off_drops_and_the_sender_retries_until_it_is_on(tmp_path):
    a, f, b, shop, stock = trio(tmp_path)
    try:
        f.forwarding = False
        conv = shop.begin_dialog("ShopService", "StockService", contract=CONTRACT)
        conv.send(b"<wait/>", message_type=ORDER)
        wait_for(lambda: [s for s in status(a) if "forwarding is off" in s],
                 what="F's refusal at A")
        assert stock.receive("StockQueue", timeout=0.3) == []
        f.forwarding = True  # switched on while F serves: A's next retry goes through
        assert drain(stock, "StockQueue", 1)[0].message_body == b"<wait/>"
        wait_for(lambda: status(a) == [], what="A's transmission queue to drain")
    finally:
        close(a, f, b)


def _loop(tmp_path: Path, size: int) -> None:
    a, *forwarders = _instances(tmp_path, ["a"] + [f"f{i}" for i in range(size)])
    try:
        shop = a.create_database("Shop")
        define_objects(shop)
        shop.create_queue("ShopQueue")
        shop.create_service("ShopService", queue="ShopQueue")
        shop.create_route("ToLoop", service_name="Lost", address=forwarders[0].endpoint.address)
        for i, fw in enumerate(forwarders):  # each sends it to the next, the last to the first
            fw.database("msdb").create_route(
                "Round", service_name="Lost",
                address=forwarders[(i + 1) % size].endpoint.address)
            fw.forwarding = True
        conv = shop.begin_dialog("ShopService", "Lost", contract=CONTRACT)
        conv.send(b"<round/>", message_type=ORDER)
        found = wait_for(lambda: [e for fw in forwarders for e in events(fw, DROPPED)
                                  if e[0] == "no hops left"],
                         timeout=60, what="the loop to end with an event")
        assert "no hops left (a routing loop?)" in found[0][1]
        assert len(status(a)) == 1  # still the sender's: it keeps retrying (P5.3)
    finally:
        close(a, *forwarders)


def test_R7_1_a_loop_between_two_forwarders_ends(tmp_path):
    _loop(tmp_path, 2)


def test_R7_1_a_loop_among_three_forwarders_ends(tmp_path):
    _loop(tmp_path, 3)


def test_R7_3_memory_bound_drops_with_an_event_and_the_view_shows_what_is_held(tmp_path):
    # the next hop accepts TCP and never answers TLS: F holds what it forwards until the
    # handshake times out
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        a, f = _instances(tmp_path, ["a", "f"], fragment_size=512 * 1024,
                          handshake_timeout=20.0)
        try:
            shop = a.create_database("Shop")
            define_objects(shop)
            shop.create_queue("ShopQueue")
            shop.create_service("ShopService", queue="ShopQueue")
            shop.create_route("ToF", service_name="Far", address=f.endpoint.address)
            silent_address = f"tcp://127.0.0.1:{silent.getsockname()[1]}"
            f.database("msdb").create_route("OnToFar", service_name="Far",
                                            address=silent_address)
            f.forwarding = True
            f.forwarding_size_mb = 1  # taken up by the running endpoint within a second
            wait_for(lambda: f.endpoint.transport.forwarder.limit == 2**20,
                     what="the new bound")
            conv = shop.begin_dialog("ShopService", "Far", contract=CONTRACT)
            conv.send(b"y" * (2 * 2**20), message_type=ORDER)  # 4 fragments of 512 KiB
            over = wait_for(lambda: [e for e in events(f, DROPPED)
                                     if e[0] == "over the memory bound"],
                            what="a fragment dropped over the bound")
            assert "memory bound of 1048576 bytes" in over[0][1]
            rows = wait_for(lambda: f.sql(
                "SELECT conversation_id, is_initiator, to_service_name, from_service_name, "
                "adjacent_broker_address, message_sequence_number, message_fragment_number, "
                "hops_remaining, time_to_live FROM sys.dm_broker_forwarded_messages"
            ).fetchall(), what="the held fragment in the view")
            assert rows == [(conv.conversation_id, True, "Far", "ShopService", silent_address,
                             0, 0, 32, 60_000)]
            assert f.endpoint.transport.forwarder.held_bytes == 512 * 1024 + 256
        finally:
            close(a, f)


def test_R7_2_a_route_to_this_instance_itself_is_routed_again_with_msdb(tmp_path):
    a, b = _instances(tmp_path, ["a", "b"])
    try:
        shop, stock = a.create_database("Shop"), b.create_database("Stock")
        for db in (shop, stock):
            define_objects(db)
        shop.create_queue("ShopQueue")
        shop.create_service("ShopService", queue="ShopQueue")
        stock.create_queue("StockQueue")
        stock.create_service("StockService", queue="StockQueue", contracts=[CONTRACT])
        stock.create_route("ToShop", service_name="ShopService", address=a.endpoint.address)
        shop.create_route("ToMyself", service_name="StockService", address=a.endpoint.address)
        a.database("msdb").create_route("OnToStock", service_name="StockService",
                                        address=b.endpoint.address)
        conv = shop.begin_dialog("ShopService", "StockService", contract=CONTRACT)
        conv.send(b"<first/>", message_type=ORDER)  # forwarding off: msdb may not send it
        wait_for(lambda: status(a) and "could not be found" in status(a)[0],
                 what="the message to wait for a route")
        assert stock.receive("StockQueue", timeout=0.3) == []
        a.forwarding = True
        a.run_pending_all()
        assert [m.message_body for m in drain(stock, "StockQueue", 1)] == [b"<first/>"]
    finally:
        close(a, b)
