"""Forwarding (R7) with every instance in its own process (`pybroker serve`, each its own
file and endpoint on 127.0.0.1): A sends, F1-F3 forward with msdb's routes, B receives.

- R7.1: a message caught in a loop between two forwarders (F1 <-> F2), and one in a loop
  among three (F1 -> F2 -> F3 -> F1), runs out of hops and is dropped with an event;
- R7.3: F1 holds at most ``forwarding_size_mb``: a fragment over it is dropped with an
  event, and once the bound is raised (while F1 serves) the sender's retry goes through;
- R7.2: A's route to its own endpoint makes the conversation of remote origin there, routed
  again with A's msdb: it waits while A forwards nothing, and leaves once forwarding is on.

The test sets the files up, starts the five processes, and acts on each as a client.
Every process is started by pid and stopped by pid in a ``finally``; every wait is bounded."""

from __future__ import annotations

from pathlib import Path

import pybroker
from tests.process_helpers import Served, free_ports, start_all, trust_each_other, wait_until
from tests.wire_helpers import CONTRACT, ORDER, define_objects

DROPPED = "Broker:Forwarded Message Dropped"
BIG = 2 * 2**20  # two fragments of 1 MiB (the default fragment size): each over 1 MB


def set_up(files: dict[str, Path], ports: dict[str, int]) -> None:
    address = {name: f"tcp://127.0.0.1:{port}" for name, port in ports.items()}
    trust_each_other(*files.values())
    a, b = pybroker.connect(files["a"], worker=False), pybroker.connect(files["b"], worker=False)
    try:
        shop, stock = a.create_database("Shop"), b.create_database("Stock")
        for db in (shop, stock):
            define_objects(db)
        shop.create_queue("ShopQueue")
        shop.create_service("ShopService", queue="ShopQueue")
        for service in ("StockService", "AuditService"):
            stock.create_queue(f"{service}Queue")
            stock.create_service(service, queue=f"{service}Queue", contracts=[CONTRACT])
        for service in ("StockService", "LostTwo", "LostThree"):
            shop.create_route(f"To{service}", service_name=service, address=address["f1"])
        # R7.2: a route to A's own endpoint; A's msdb knows the way on
        shop.create_route("ToMyself", service_name="AuditService", address=address["a"])
        a.database("msdb").create_route("OnToAudit", service_name="AuditService",
                                        address=address["b"])
        stock.create_route("ToShop", service_name="ShopService", address=address["f1"])
    finally:
        a.close()
        b.close()
    hops = {  # msdb's routes of each forwarder
        "f1": [("StockService", "b"), ("ShopService", "a"), ("LostTwo", "f2"),
               ("LostThree", "f2")],
        "f2": [("LostTwo", "f1"), ("LostThree", "f3")],
        "f3": [("LostThree", "f1")],
    }
    for name, routes in hops.items():
        inst = pybroker.connect(files[name], worker=False)
        try:
            for service, to in routes:
                inst.database("msdb").create_route(f"On{service}", service_name=service,
                                                   address=address[to])
            inst.forwarding = True
            if name == "f1":
                inst.forwarding_size_mb = 1
        finally:
            inst.close()


def dropped(forwarders: list[Served], reason: str, service: str) -> list[str]:
    """Descriptions of the forwarders' "forwarded message dropped" events for ``service``."""
    return [d for fw in forwarders for (d,) in fw.sql(
        "SELECT description FROM sys.broker_events WHERE event_class = ? AND subclass = ?",
        [DROPPED, reason]) if f"to {service!r}" in d]


def test_R7_1_R7_2_R7_3_loops_end_the_bound_drops_and_a_route_to_itself_uses_msdb(tmp_path):
    names = ["a", "f1", "f2", "f3", "b"]
    files = {n: tmp_path / f"{n}.duckdb" for n in names}
    ports = dict(zip(names, free_ports(len(names)), strict=True))
    set_up(files, ports)
    served = {n: Served(files[n], ports[n]) for n in names}
    a, f1, f2, f3, b = (served[n] for n in names)
    try:
        start_all(*served.values())
        with a.client() as inst:
            shop = inst.database("Shop")
            with shop.transaction():
                for service in ("LostTwo", "LostThree"):
                    conv = shop.begin_dialog("ShopService", service, contract=CONTRACT)
                    conv.send(f"<round to='{service}'/>", message_type=ORDER)
                big = shop.begin_dialog("ShopService", "StockService", contract=CONTRACT)
                big.send(bytes(range(256)) * (BIG // 256), message_type=ORDER)
                big.send(b"<after/>", message_type=ORDER)
                audit = shop.begin_dialog("ShopService", "AuditService", contract=CONTRACT)
                audit.send(b"<audit/>", message_type=ORDER)
            audit_handle = audit.handle

        # R7.1: each loop ends at a forwarder with no hops left, whichever it is
        for service, loop in (("LostTwo", [f1, f2]), ("LostThree", [f1, f2, f3])):
            found = wait_until(lambda s=service, lp=loop: dropped(lp, "no hops left", s),
                               what=f"the loop of {len(loop)} to end with an event")
            assert "no hops left (a routing loop?)" in found[0]
        assert dropped([f3], "no hops left", "LostTwo") == []  # F3 is not in that loop

        # R7.3: F1's bound (1 MB) is under one fragment (1 MiB and its header): dropped
        over = wait_until(lambda: dropped([f1], "over the memory bound", "StockService"),
                          what="a fragment dropped over the bound")
        assert "memory bound of 1048576 bytes" in over[0]
        assert b.sql("SELECT count(*) FROM queue_contents('Stock', 'StockServiceQueue') "
                     "WHERE status = 1") == [(0,)]
        with f1.client() as inst:
            inst.forwarding_size_mb = 10  # while F1 serves: the sender's next retry passes
        got = wait_until(lambda: b.sql(
            "SELECT message_sequence_number, octet_length(message_body) FROM "
            "queue_contents('Stock', 'StockServiceQueue') WHERE status = 1 "
            "ORDER BY message_sequence_number"),
            what="the big message through F1 with the bound raised", timeout=90)
        assert got[0] == (0, BIG)
        wait_until(lambda: len(b.sql("SELECT 1 FROM queue_contents('Stock', "
                                     "'StockServiceQueue') WHERE status = 1")) == 2,
                   what="the message after it")
        assert f1.sql("SELECT count(*) FROM sys.conversation_endpoints") == [(0,)]

        # R7.2: routed again with A's msdb, which may not send it while forwarding is off
        status = a.sql("SELECT transmission_status FROM sys.transmission_queue WHERE "
                       "conversation_handle = ?", [audit_handle])
        assert len(status) == 1 and "could not be found" in status[0][0], status
        assert b.sql("SELECT count(*) FROM queue_contents('Stock', 'AuditServiceQueue')"
                     ) == [(0,)]
        with a.client() as inst:
            inst.forwarding = True
            inst.run_pending_all()
        wait_until(lambda: b.sql("SELECT decode(message_body) FROM queue_contents("
                                 "'Stock', 'AuditServiceQueue')") == [("<audit/>",)],
                   what="the message routed again with A's msdb")
        for child in served.values():
            child.stop()
    finally:
        for child in served.values():
            child.close()
