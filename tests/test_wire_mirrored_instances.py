"""Mirrored pairs across instances in one process (R9): an initiator I routes StockService
to a mirrored pair, principal P and mirror M, whose Stock databases share one broker
identifier. Messages go to the principal only; after a failover they go to the new
principal; with no principal nothing is sent and both are asked again; the state is in
sys.dm_broker_mirrored_routes and sys.broker_events; what carries over on failover."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import pybroker
from pybroker.devtools.demos.routing import build_example, decide_case, load_examples
from pybroker.errors import InvalidArgumentError, NotFoundError
from tests.wire_helpers import CONTRACT, ORDER, define_objects, drain, wait_for

EVENT = "Broker:Mirrored Route State Changed"
ERROR = "http://schemas.microsoft.com/SQL/ServiceBroker/Error"


def _instances(tmp_path: Path, names: list[str]) -> list[pybroker.Instance]:
    insts = [pybroker.connect(tmp_path / f"{n}.duckdb", retry_scale=0.01) for n in names]
    for i, inst in enumerate(insts):
        for j, other in enumerate(insts):
            if i != j:
                inst.trust(names[j], other.certificate)
    for inst in insts:
        inst.start_endpoint(0)
    return insts


def trio(tmp_path: Path):
    i, p, m = _instances(tmp_path, ["i", "p", "m"])
    shop = i.create_database("Shop")
    stock_p = p.create_database("Stock")
    stock_m = m.create_database("Stock", broker_instance=stock_p.broker_instance)
    for db in (shop, stock_p, stock_m):
        define_objects(db)
    shop.create_queue("ShopQueue")
    shop.create_service("ShopService", queue="ShopQueue")
    for db in (stock_p, stock_m):
        db.create_queue("StockQueue")
        db.create_service("StockService", queue="StockQueue", contracts=[CONTRACT])
    stock_p.set_mirroring("PRINCIPAL", m.endpoint.address)
    stock_m.set_mirroring("MIRROR", p.endpoint.address)
    shop.create_route("ToStock", service_name="StockService", address=p.endpoint.address,
                      mirror_address=m.endpoint.address)
    return i, p, m, shop, stock_p, stock_m


def events(inst: pybroker.Instance) -> list[tuple[str, str | None]]:
    inst.run_pending()  # broker events are written with the next unit of work
    return inst.sql("SELECT subclass, peer_address FROM sys.broker_events "
                    "WHERE event_class = ? ORDER BY event_id", [EVENT]).fetchall()


def view(inst: pybroker.Instance) -> list[tuple]:
    return inst.sql("SELECT database_name, route_name, state_desc, principal_address, "
                    "address_answer, mirror_address_answer "
                    "FROM sys.dm_broker_mirrored_routes").fetchall()


def send(conv: pybroker.Conversation, bodies: list[bytes]) -> None:
    for body in bodies:
        conv.send(body, message_type=ORDER)


def close(*insts: pybroker.Instance) -> None:
    for inst in insts:
        inst.close()


def test_the_role_is_a_setting_shown_in_sys_database_mirroring(tmp_path):
    inst = pybroker.connect(tmp_path / "x.duckdb")
    try:
        db = inst.create_database("Stock")
        assert db.mirroring_role is None
        db.set_mirroring("principal", "tcp://partner:4022")
        assert (db.mirroring_role, db.mirroring_partner) == ("PRINCIPAL", "tcp://partner:4022")
        assert inst.sql("SELECT mirroring_role_desc, mirroring_partner_name, "
                        "mirroring_state_desc FROM sys.database_mirroring WHERE "
                        "database_id = ?", [db.database_id]).fetchall() == [
            ("PRINCIPAL", "tcp://partner:4022", "SUSPENDED")]
        assert db.fail_over() == "MIRROR" and db.mirroring_role == "MIRROR"
        assert db.fail_over() == "PRINCIPAL"
        with pytest.raises(InvalidArgumentError, match="'PRINCIPAL' or 'MIRROR'"):
            db.set_mirroring("WITNESS", "tcp://partner:4022")
        with pytest.raises(InvalidArgumentError, match="tcp://host:port"):
            db.set_mirroring("MIRROR", "partner")
        db.set_mirroring(None)
        assert db.mirroring_role is None
        with pytest.raises(NotFoundError, match="not part of a mirrored pair"):
            db.fail_over()
        assert inst.sql("SELECT count(*) FROM sys.database_mirroring WHERE "
                        "mirroring_role_desc IS NOT NULL").fetchone()[0] == 0
    finally:
        inst.close()


def test_R9_2_messages_go_to_the_principal_only(tmp_path):
    i, p, m, shop, stock_p, stock_m = trio(tmp_path)
    try:
        conv = shop.begin_dialog("ShopService", "StockService", contract=CONTRACT)
        bodies = [f"<order n='{n}'/>".encode() for n in range(20)]
        send(conv, bodies)
        got = drain(stock_p, "StockQueue", len(bodies))
        assert [g.message_body for g in got] == bodies
        wait_for(lambda: i.sql("SELECT count(*) FROM sys.transmission_queue"
                               ).fetchone()[0] == 0, what="I's transmission queue to drain")
        assert stock_m.receive("StockQueue", max_messages=100) == []
        assert m.sql("SELECT count(*) FROM sys.conversation_endpoints").fetchone()[0] == 0
        assert events(i) == [("PRINCIPAL", p.endpoint.address)]
        wait_for(lambda: view(i) == [("Shop", "ToStock", "PRINCIPAL", p.endpoint.address,
                                      "PRINCIPAL", "MIRROR")],
                 what="the view to show P as principal, M as mirror")
    finally:
        close(i, p, m)


def test_R9_3_after_failover_messages_go_to_the_new_principal(tmp_path):
    """The principal's role flips and its endpoint stops; the mirror is promoted. A
    conversation begun after the failover is served by the new principal, whole and in
    order. One begun before cannot continue: the new principal has no endpoint for it
    (nothing is replicated), so it refuses its next message, and the initiator, whose
    messages the old principal acknowledged, ends it with an error that says why."""
    i, p, m, shop, stock_p, stock_m = trio(tmp_path)
    try:
        before = shop.begin_dialog("ShopService", "StockService", contract=CONTRACT)
        send(before, [b"<a/>", b"<b/>"])
        assert len(drain(stock_p, "StockQueue", 2)) == 2
        wait_for(lambda: i.sql("SELECT count(*) FROM sys.transmission_queue"
                               ).fetchone()[0] == 0, what="P to acknowledge both")
        stock_p.fail_over()
        p.endpoint.close()
        stock_m.fail_over()
        # both SENDs in one transaction: nothing leaves before it commits. Sent one by one,
        # <c/> could be refused by M and end `before` (ER) before <d/>'s SEND, which then
        # raised (the 1 run in 10-20 of stop 24's note: the refusal takes ~10 ms, a SEND too)
        with shop.transaction():
            send(before, [b"<c/>", b"<d/>"])
        after = shop.begin_dialog("ShopService", "StockService", contract=CONTRACT)
        bodies = [f"<order n='{n}'/>".encode() for n in range(10)]
        send(after, bodies)
        got = drain(stock_m, "StockQueue", len(bodies))
        assert [g.message_body for g in got] == bodies  # once, in order, at M
        assert [g.message_sequence_number for g in got] == list(range(10))
        # the conversation begun before ends at I with an error naming M and the failover
        (error,) = drain(shop, "ShopQueue", 1)
        assert error.conversation_handle == before.handle
        assert error.message_type_name == ERROR
        assert b"<Code>-8462</Code>" in error.message_body
        text = error.message_body.decode()
        assert f"principal of the mirrored pair at {m.endpoint.address}" in text
        assert "former principal, before a failover" in text
        assert before.state == "ER" and after.state == "CO"
        assert i.sql("SELECT state_desc, error_code FROM sys.conversation_endpoints WHERE "
                     "conversation_handle = ?", [before.handle]).fetchall() == [
            ("ERROR", -8462)]
        wait_for(lambda: i.sql("SELECT count(*) FROM sys.transmission_queue"
                               ).fetchone()[0] == 0, what="I's transmission queue to empty")
        i.run_pending()  # broker events are written with the next unit of work
        assert i.sql("SELECT event_class, subclass, conversation_id::VARCHAR, "
                     "message_sequence_number FROM sys.broker_events WHERE event_class = "
                     "'Broker:Conversation'").fetchall() == [
            ("Broker:Conversation", "Broker Initiated Error", before.conversation_id, 2)]
        with pytest.raises(pybroker.BrokerError):
            before.send(b"<e/>", message_type=ORDER)  # it has ended
        # M holds nothing of it: no endpoint, no message, held or not
        assert m.sql("SELECT count(*) FROM sys.conversation_endpoints WHERE "
                     "conversation_id = ?", [before.conversation_id]).fetchone()[0] == 0
        assert m.sql("SELECT count(*) FROM sys.queue_messages").fetchone()[0] == 0
        m.run_pending()
        assert m.sql("SELECT count(*) FROM sys.broker_events WHERE event_class = "
                     "'Broker:Message Undeliverable' AND conversation_id = ? AND "
                     "description LIKE '%not known to the principal%'",
                     [before.conversation_id]).fetchone()[0] >= 1
        states = [s for s, _ in events(i)]
        assert states[0] == "PRINCIPAL" and states[-1] == "PRINCIPAL" and "PROBING" in states
        assert events(i)[-1][1] == m.endpoint.address
        wait_for(lambda: view(i) and view(i)[0][3] == m.endpoint.address,
                 what="the view to show the new principal")
    finally:
        close(i, p, m)


def test_R9_3_a_principal_that_became_mirror_refuses_and_its_partner_takes_over(tmp_path):
    """Both endpoints stay up: the old principal refuses the next message (it is a mirror
    now), which sends the initiator to ask both again."""
    i, p, m, shop, stock_p, stock_m = trio(tmp_path)
    try:
        conv = shop.begin_dialog("ShopService", "StockService", contract=CONTRACT)
        send(conv, [b"<a/>"])
        assert len(drain(stock_p, "StockQueue", 1)) == 1
        stock_p.fail_over()
        stock_m.fail_over()
        fresh = shop.begin_dialog("ShopService", "StockService", contract=CONTRACT)
        send(fresh, [b"<x/>", b"<y/>"])
        got = drain(stock_m, "StockQueue", 2)
        assert [g.message_body for g in got] == [b"<x/>", b"<y/>"]
        assert stock_p.receive("StockQueue", max_messages=10) == []
        p.run_pending()
        refused = p.sql("SELECT count(*) FROM sys.broker_events WHERE event_class = "
                        "'Broker:Message Undeliverable' AND description LIKE "
                        "'%mirror of a mirrored pair%'").fetchone()[0]
        assert refused >= 1
        assert [s for s, _ in events(i)][-1] == "PRINCIPAL"
    finally:
        close(i, p, m)


def test_R9_4_with_no_principal_nothing_is_sent_and_both_are_asked_again(tmp_path):
    i, p, m, shop, stock_p, stock_m = trio(tmp_path)
    try:
        stock_p.fail_over()  # both are mirrors now
        conv = shop.begin_dialog("ShopService", "StockService", contract=CONTRACT)
        send(conv, [b"<a/>", b"<b/>"])
        wait_for(lambda: any(s == "NO PRINCIPAL" for s, _ in events(i)),
                 what="the pair to have no principal")
        wait_for(lambda: view(i) and view(i)[0][2] == "NO PRINCIPAL", what="the view")
        first = i.sql("SELECT last_probe_time FROM sys.dm_broker_mirrored_routes"
                      ).fetchone()[0]
        wait_for(lambda: i.sql("SELECT last_probe_time FROM sys.dm_broker_mirrored_routes"
                               ).fetchone()[0] > first, what="both to be asked again")
        status = i.sql("SELECT transmission_status FROM sys.transmission_queue").fetchall()
        assert len(status) == 2 and all("principal is not known" in s for s, in status)
        for inst in (p, m):  # nothing was sent to either
            assert inst.sql("SELECT count(*) FROM sys.conversation_endpoints"
                            ).fetchone()[0] == 0
        stock_m.fail_over()  # M claims it: the messages go there
        got = drain(stock_m, "StockQueue", 2)
        assert [g.message_body for g in got] == [b"<a/>", b"<b/>"]
        assert stock_p.receive("StockQueue", max_messages=10) == []
    finally:
        close(i, p, m)


def test_the_seeds_example_3_end_to_end_the_partner_that_says_it_is_principal_gets_it(
        tmp_path):
    """Example 3 (a network route to a mirrored database), its partners' host names mapped
    to two local instances: the route names partner1 first, but partner2 is the principal
    now, so the message goes to partner2 once both were asked (R9.2)."""
    example = next(e for e in load_examples() if e.number == 3)
    initiator, partner1, partner2 = _instances(tmp_path, ["initiator", "p1", "p2"])
    try:
        hosts = {"tcp://partner1.Adventure-Works.com:4022/": partner1.endpoint.address,
                 "tcp://partner2.Adventure-Works.com:4022/": partner2.endpoint.address}
        local = dataclasses.replace(example, routes={
            db: [{**r, "address": hosts.get(r["address"], r["address"]),
                  "mirror_address": hosts.get(r["mirror_address"], r["mirror_address"])}
                 for r in routes] for db, routes in example.routes.items()})
        build_example(initiator, local)
        case = local.cases[0]
        decision = decide_case(initiator, local, case)
        assert (decision.outcome, decision.route, decision.address,
                decision.mirror_address) == (
            "send", "OrderPartsRoute", partner1.endpoint.address, partner2.endpoint.address)
        broker = None
        for inst, role, partner in ((partner1, "MIRROR", partner2),
                                    (partner2, "PRINCIPAL", partner1)):
            db = inst.create_database("AdventureWorks2008R2", broker_instance=broker)
            broker = db.broker_instance
            db.create_queue("OrderPartsQueue")
            db.create_service("OrderParts", queue="OrderPartsQueue", contracts=["DEFAULT"])
            db.set_mirroring(role, partner.endpoint.address)
        source = initiator.database(case.origin)
        conv = source.begin_dialog("InventoryService", case.service)
        conv.send(b"<OrderParts/>")
        got = drain(partner2.database("AdventureWorks2008R2"), "OrderPartsQueue", 1)
        assert got[0].message_body == b"<OrderParts/>"
        assert partner1.database("AdventureWorks2008R2").receive("OrderPartsQueue") == []
        assert events(initiator) == [("PRINCIPAL", partner2.endpoint.address)]
    finally:
        close(initiator, partner1, partner2)
