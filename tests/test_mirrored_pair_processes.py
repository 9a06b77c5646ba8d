"""Mirrored routes (R9) with every instance in its own process (`pybroker serve`, each its
own file and endpoint on 127.0.0.1): initiator I, the pair P (principal at first) and M
sharing database Stock's broker identifier, and forwarder F whose msdb route to the pair is
mirrored too. I's Shop routes StockService both to a dead address and to the pair; I's
Relay routes it to F.

- R9.1: the mirrored route is chosen over the plain one (nothing reaches the dead address);
- R9.2: after the probe only the principal P receives, from I and through F;
- R9.3: after a failover P says it is no longer principal (a refusal): I and F ask again
  and send to M, which claims it;
- R9.4, then R9.3: M (principal now) is killed and P is still MIRROR: neither claims, so
  I and F send nothing and keep asking both; once P claims, what waited is delivered there.

Every process is started by pid and stopped by pid in a ``finally``; every wait is bounded."""

from __future__ import annotations

import uuid
from pathlib import Path

import pybroker
from tests.process_helpers import Served, free_ports, start_all, trust_each_other, wait_until
from tests.wire_helpers import CONTRACT, ORDER, define_objects

PER_ROUND = 4  # conversations from each of Shop (direct) and Relay (through F) per round


def set_up(files: dict[str, Path], address: dict[str, str], dead: str) -> None:
    trust_each_other(*files.values())
    broker = str(uuid.uuid4())  # the pair's shared broker identifier
    insts = {n: pybroker.connect(f, worker=False) for n, f in files.items()}
    try:
        i = insts["i"]
        for name in ("Shop", "Relay"):
            db = i.create_database(name)
            define_objects(db)
            db.create_queue(f"{name}Queue")
            db.create_service(f"{name}Service", queue=f"{name}Queue")
        i.database("Shop").create_route("Plain", service_name="StockService", address=dead)
        i.database("Shop").create_route("Pair", service_name="StockService",
                                        address=address["p"], mirror_address=address["m"])
        i.database("Relay").create_route("ViaF", service_name="StockService",
                                         address=address["f"])
        for me, partner, role in (("p", "m", "PRINCIPAL"), ("m", "p", "MIRROR")):
            stock = insts[me].create_database("Stock", broker_instance=broker)
            stock.set_mirroring(role, address[partner])
            define_objects(stock)
            stock.create_queue("StockQueue")
            stock.create_service("StockService", queue="StockQueue", contracts=[CONTRACT])
            stock.create_route("ToShop", service_name="ShopService", address=address["i"])
            stock.create_route("ToRelay", service_name="RelayService", address=address["f"])
        f = insts["f"]
        f.database("msdb").create_route("OnToPair", service_name="StockService",
                                        address=address["p"], mirror_address=address["m"])
        f.database("msdb").create_route("OnToRelay", service_name="RelayService",
                                        address=address["i"])
        f.forwarding = True
    finally:
        for inst in insts.values():
            inst.close()


def send_round(i: Served, tag: str) -> None:
    with i.client() as inst:
        for name in ("Shop", "Relay"):
            db = inst.database(name)
            with db.transaction():
                for n in range(PER_ROUND):
                    db.begin_dialog(f"{name}Service", "StockService", contract=CONTRACT).send(
                        f"{tag}:{name}:{n}", message_type=ORDER)


def bodies(partner: Served) -> list[str]:
    return sorted(b for (b,) in partner.sql(
        "SELECT decode(message_body) FROM queue_contents('Stock', 'StockQueue') "
        "WHERE status = 1"))


def expected(tag: str) -> list[str]:
    return sorted(f"{tag}:{name}:{n}" for name in ("Shop", "Relay") for n in range(PER_ROUND))


def pair_state(server: Served) -> tuple[str, str | None]:
    rows = server.sql("SELECT DISTINCT state_desc, principal_address FROM "
                      "sys.dm_broker_mirrored_routes")
    return rows[0] if len(rows) == 1 else ("?", str(rows))


def test_R9_1_to_R9_4_principal_only_failover_and_no_principal_in_processes(tmp_path):
    names = ["i", "p", "m", "f"]
    files = {n: tmp_path / f"{n}.duckdb" for n in names}
    *ports, dead_port = free_ports(len(names) + 1)
    port = dict(zip(names, ports, strict=True))
    address = {n: f"tcp://127.0.0.1:{port[n]}" for n in names}
    set_up(files, address, f"tcp://127.0.0.1:{dead_port}")
    served = {n: Served(files[n], port[n], "--probe-timeout", 2) for n in names}
    i, p, m, f = (served[n] for n in names)
    try:
        start_all(*served.values())
        # R9.1, R9.2: the mirrored route, then the principal only (directly and through F)
        send_round(i, "one")
        wait_until(lambda: bodies(p) == expected("one"), what="round one at P")
        assert bodies(m) == [] and m.sql("SELECT count(*) FROM sys.conversation_endpoints"
                                         ) == [(0,)]
        for sender in (i, f):  # the view is at most a second old
            wait_until(lambda s=sender: pair_state(s) == ("PRINCIPAL", address["p"]),
                       what="the senders to know P as principal")

        # R9.3: P is no longer principal (a failover, the new principal first)
        for partner in (m, p):
            with partner.client() as inst:
                inst.database("Stock").fail_over()
        send_round(i, "two")
        wait_until(lambda: bodies(m) == expected("two"), what="round two at M")
        assert bodies(p) == expected("one")
        for sender in (i, f):
            wait_until(lambda s=sender: pair_state(s) == ("PRINCIPAL", address["m"]),
                       what="the senders to follow M")

        # R9.4: M (principal) is gone and P is a mirror: nothing is sent, both asked again
        m.kill()
        send_round(i, "three")
        for sender in (i, f):
            wait_until(lambda s=sender: pair_state(s)[0] == "NO PRINCIPAL",
                       what="no principal known")
        (first,) = i.sql("SELECT max(last_probe_time) FROM sys.dm_broker_mirrored_routes")
        wait_until(lambda: i.sql("SELECT max(last_probe_time) FROM "
                                 "sys.dm_broker_mirrored_routes") > [first],
                   what="both partners asked again")
        assert bodies(p) == expected("one")  # nothing to the partner that does not claim
        # R9.3: P claims it now: what waited goes there
        with p.client() as inst:
            assert inst.database("Stock").fail_over() == "PRINCIPAL"
        wait_until(lambda: bodies(p) == sorted(expected("one") + expected("three")),
                   timeout=90, what="round three at P once it claims")
        for sender in (i, f):  # the view is at most a second old
            wait_until(lambda s=sender: pair_state(s) == ("PRINCIPAL", address["p"]),
                       what="the senders to follow P")
        events = i.sql("SELECT subclass FROM sys.broker_events WHERE event_class = "
                       "'Broker:Mirrored Route State Changed' ORDER BY event_id")
        assert ("NO PRINCIPAL",) in events and events[-1] == ("PRINCIPAL",)
        assert f.sql("SELECT count(*) FROM sys.conversation_endpoints") == [(0,)]
        for child in (i, p, f):
            child.stop()
    finally:
        for child in served.values():
            child.close()
