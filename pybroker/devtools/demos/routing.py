"""The seven routing examples of the seeds (conformance/routing_examples.json) as instances.

Each example gives the routing tables of AdventureWorks2008R2 and msdb, the forwarding
setting and the services of the instance; each case is one conversation and the decision
the seeds require. ``pybroker demo`` and the conformance tests build them with
:func:`build_example` and compare with :func:`check_case`.

The JSON is a copy of ``shared/conformance/routing_examples.json`` shipped in the package
(``pybroker/data``), so the demo runs from an installed wheel.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from pybroker.api.instance import Instance
from pybroker.core.routing.decision import RouteDecision

EXAMPLES_FILE = Path(__file__).resolve().parents[2] / "data" / "routing_examples.json"
SYSTEM_DATABASES = ("master", "msdb")


@dataclass(frozen=True, slots=True)
class Case:
    """One conversation of an example and the decision the seeds require."""

    origin: str
    service: str
    broker_instance: str | None
    forwarding: bool | None  # overrides the example's setting for this case only
    expect: dict[str, Any]
    note: str | None


@dataclass(frozen=True, slots=True)
class Example:
    id: str
    routes: dict[str, list[dict[str, Any]]]
    forwarding: bool
    services: dict[str, list[str]]
    cases: tuple[Case, ...]

    @property
    def number(self) -> int:
        return int(self.id.split("-")[1])


@cache
def load_examples(path: Path = EXAMPLES_FILE) -> tuple[Example, ...]:
    data = json.loads(path.read_text(encoding="utf-8"))
    examples = []
    for raw in data["examples"]:
        cases = tuple(
            Case(
                c["origin"], c["service"], c.get("broker_instance"), c.get("forwarding"),
                c["expect"], c.get("note"),
            )
            for c in raw["cases"]
        )
        examples.append(
            Example(raw["id"], raw["routes"], raw["forwarding"], raw["services"], cases)
        )
    return tuple(examples)


def build_example(inst: Instance, example: Example) -> None:
    """Give ``inst`` (a fresh instance) the databases, services, routes and forwarding
    setting of ``example``. AutoCreatedLocal is dropped where the example's table lacks it."""
    names = [n for n in [*example.routes, *example.services] if n not in SYSTEM_DATABASES]
    for name in dict.fromkeys(names):
        inst.create_database(name)
    for db_name, services in example.services.items():
        db = inst.database(db_name)
        for service in services:
            queue = f"{service}Queue"
            db.create_queue(queue)
            db.create_service(service, queue=queue)
    for db_name, routes in example.routes.items():
        db = inst.database(db_name)
        wanted = {r["name"] for r in routes}
        if "AutoCreatedLocal" not in wanted and db_name != "master":
            db.drop_route("AutoCreatedLocal")
        existing = {r.name for r in db.routes()}
        for route in routes:
            if route["name"] in existing:
                continue
            db.create_route(
                route["name"],
                service_name=route["remote_service_name"],
                broker_instance=route["broker_instance"],
                address=route["address"],
                mirror_address=route["mirror_address"],
            )
    inst.forwarding = example.forwarding


def decide_case(inst: Instance, example: Example, case: Case) -> RouteDecision:
    """Route one case, with the case's own forwarding setting where it gives one."""
    inst.forwarding = example.forwarding if case.forwarding is None else case.forwarding
    try:
        return inst.route(case.service, broker_instance=case.broker_instance, origin=case.origin)
    finally:
        inst.forwarding = example.forwarding


def check_case(case: Case, decision: Any) -> list[str]:
    """What differs between the decision and what the seeds require (empty: it conforms).

    ``decision`` is a RouteDecision or anything with the same attribute names."""
    problems = []
    expect = case.expect
    for key in ("outcome", "route", "address", "mirror_address", "database"):
        if key in expect and getattr(decision, key) != expect[key]:
            problems.append(f"{key} is {getattr(decision, key)!r}, expected {expect[key]!r}")
    for key, field in (("route_in", "route"), ("address_in", "address")):
        if key in expect and getattr(decision, field) not in expect[key]:
            problems.append(f"{field} {getattr(decision, field)!r} is not one of {expect[key]}")
    return problems


def iter_cases(examples: tuple[Example, ...]) -> Iterator[tuple[Example, Case]]:
    for example in examples:
        for case in example.cases:
            yield example, case


# -- the demo's conversation -------------------------------------------------------

CONVERSATION_DATABASES = ("Shop", "Warehouse")


def run_conversation(inst: Instance, out: Callable[[str], None] = print) -> None:
    """A short conversation between two services in two databases of ``inst``, printed as
    an analyst sees it in the sys.* views (sql/demo/): BEGIN DIALOG and SENDs, RECEIVE, a
    reply, END CONVERSATION on both sides, and a message that waits in the transmission
    queue for a service not yet created, then delivered when it is created (R2.7, C4)."""
    shop, warehouse = (inst.create_database(name) for name in CONVERSATION_DATABASES)
    for db in (shop, warehouse):
        db.create_message_type("StockRequest", validation="WELL_FORMED_XML")
        db.create_message_type("StockReply", validation="WELL_FORMED_XML")
        db.create_contract("StockContract",
                           {"StockRequest": "INITIATOR", "StockReply": "TARGET"})
    shop.create_queue("OrderQueue")
    shop.create_service("OrderService", queue="OrderQueue")
    warehouse.create_queue("StockQueue")
    warehouse.create_service("StockService", queue="StockQueue", contracts=["StockContract"])
    out("Conversation: Shop's OrderService -> Warehouse's StockService "
        "(contract StockContract; routed by Shop's AutoCreatedLocal, R1.1, R4.2)")

    with shop.transaction():
        conv = shop.begin_dialog("OrderService", "StockService", contract="StockContract")
        for sku, quantity in (("A-100", 2), ("B-200", 1), ("C-300", 5)):
            conv.send(f'<StockRequest sku="{sku}" quantity="{quantity}"/>',
                      message_type="StockRequest")
    out("  Shop: BEGIN DIALOG, three SENDs, COMMIT (delivered straight into StockQueue)")
    _show(inst, "show_conversation_endpoints", out)
    _show(inst, "show_queue_messages", out)

    with warehouse.transaction():
        got = warehouse.receive("StockQueue", max_messages=10)
        out(f"  Warehouse: RECEIVE TOP (10) FROM StockQueue -> {len(got)} messages, "
            f"sequence {', '.join(str(m.message_sequence_number) for m in got)}")
        reply = warehouse.conversation(got[0].conversation_handle)
        reply.send("<StockReply reserved=\"8\"/>", message_type="StockReply")
        reply.end()
    out("  Warehouse: SEND StockReply, END CONVERSATION, COMMIT")
    with shop.transaction():
        got = shop.receive("OrderQueue", max_messages=10)
        names = ", ".join(m.message_type_name.rsplit("/", 1)[-1] for m in got)
        out(f"  Shop: RECEIVE FROM OrderQueue -> {names}; END CONVERSATION, COMMIT")
        conv.end()
    _show(inst, "show_conversation_endpoints", out)

    billing = shop.begin_dialog("OrderService", "BillingService")
    billing.send("<Invoice order=\"1001\"/>")
    out("  Shop: BEGIN DIALOG to BillingService, which no database has yet, and SEND "
        "(DELAYED, R2.7; it waits in Shop's transmission queue, C4)")
    _show(inst, "show_transmission_queue", out)
    warehouse.create_queue("BillingQueue")
    warehouse.create_service("BillingService", queue="BillingQueue", contracts=["DEFAULT"])
    out("  Warehouse: CREATE QUEUE BillingQueue, CREATE SERVICE BillingService "
        "(the waiting message is delivered at once)")
    _show(inst, "show_transmission_queue", out)
    _show(inst, "show_queue_messages", out)


def _show(inst: Instance, query: str, out: Callable[[str], None], who: str = "") -> None:
    """Run sql/demo/<query>.sql on its own cursor and print it and its rows."""
    from pybroker.storage.templates import render

    _show_sql(inst, render(f"demo/{query}.sql"), out, who)


def _show_sql(inst: Instance, text: str, out: Callable[[str], None], who: str = "") -> None:
    """Run ``text`` (a query without parameters) on its own cursor; print it and its rows,
    with ``who`` (the instance) before it when there are several."""
    relation = inst.sql(text)
    columns, rows = relation.columns, relation.fetchall()
    sql = " ".join(line.strip() for line in text.splitlines() if not line.startswith("--"))
    out(f"    {who + ': ' if who else ''}{sql}")
    cells = [["NULL" if v is None else str(v) for v in row] for row in rows]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    for row in [list(columns), *cells]:
        out("      " + "  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    if not rows:
        out("      (no rows)")


# -- the demo's two instances (the wire) ------------------------------------------------------

_ROUTES_SQL = """SELECT database_name, name, remote_service_name, address
FROM sys.routes
WHERE database_name IN ('Shop', 'Warehouse') AND address <> 'LOCAL'
ORDER BY database_name, name"""
_CONNECTIONS_SQL = """SELECT peer_address, state_desc, is_accept, principal_name,
    encryption_algorithm_desc, total_fragments_sent, total_fragments_received
FROM sys.dm_broker_connections
ORDER BY is_accept, connect_time"""
_EVENTS_SQL = """SELECT event_class, subclass, description
FROM sys.broker_events
ORDER BY event_id"""
RETRY_SCALE = 0.25  # the demo's retransmissions (C5): after 1 s, 2 s, ... not 4 s, 8 s, ...


def run_two_instances(out: Callable[[str], None] = print, timeout: float = 30.0) -> None:
    """Two instances, each in its own file (a temp dir) with its broker endpoint on a free
    port of 127.0.0.1: a dialog over TCP and mutual TLS (P2-P5, P8, R1.2, R5, R6, C4, C6):
    the routes both ways, the transmission queue before and after the acknowledgements,
    the conversation endpoints, sys.dm_broker_connections and sys.broker_events."""
    import tempfile

    from pybroker.api.instance import Instance

    with tempfile.TemporaryDirectory(prefix="pybroker-demo-") as tmp:
        a = Instance(Path(tmp) / "a.duckdb", retry_scale=RETRY_SCALE)
        b = None
        try:
            b = Instance(Path(tmp) / "b.duckdb", retry_scale=RETRY_SCALE)
            _two_instances(a, b, out, timeout)
        finally:
            a.close()
            if b is not None:
                b.close()


def _two_instances(a: Instance, b: Instance, out: Callable[[str], None],
                   timeout: float) -> None:
    shop, warehouse = a.create_database("Shop"), b.create_database("Warehouse")
    for db in (shop, warehouse):
        db.create_message_type("StockRequest", validation="WELL_FORMED_XML")
        db.create_message_type("StockReply", validation="WELL_FORMED_XML")
        db.create_contract("StockContract",
                           {"StockRequest": "INITIATOR", "StockReply": "TARGET"})
    shop.create_queue("OrderQueue")
    shop.create_service("OrderService", queue="OrderQueue")
    warehouse.create_queue("StockQueue")
    warehouse.create_service("StockService", queue="StockQueue", contracts=["StockContract"])
    ea, eb = a.start_endpoint(0), b.start_endpoint(0)
    a.trust("Warehouse", b.certificate)
    b.trust("Shop", a.certificate)
    shop.create_route("ToWarehouse", service_name="StockService", address=eb.address)
    warehouse.create_route("ToShop", service_name="OrderService", address=ea.address)
    out(f"Two instances, each in its own file: A (database Shop) listens on {ea.address}, "
        f"B (database Warehouse) on {eb.address}; each trusts the other's certificate "
        "(mutual TLS 1.3)")
    out("  the routes each way (R1.1; what arrives is routed with msdb's AutoCreatedLocal, "
        "R1.2)")
    _show_sql(a, _ROUTES_SQL, out, "A")
    _show_sql(b, _ROUTES_SQL, out, "B")

    with shop.transaction():
        conv = shop.begin_dialog("OrderService", "StockService", contract="StockContract")
        for sku, quantity in (("A-100", 2), ("B-200", 1), ("C-300", 5)):
            conv.send(f'<StockRequest sku="{sku}" quantity="{quantity}"/>',
                      message_type="StockRequest")
    out("  A: BEGIN DIALOG, three SENDs, COMMIT: the messages wait in Shop's transmission "
        "queue while in flight (status blank: nothing has gone wrong, C4)")
    _show(a, "show_transmission_queue", out, "A")
    got = _receive(warehouse, "StockQueue", 3, timeout)
    _wait(lambda: a.sql("SELECT count(*) FROM sys.transmission_queue").fetchone()[0] == 0,
          timeout, "the transmission queue to drain")
    out("  B acknowledges each message once it is committed in StockQueue; A deletes the "
        "acknowledged rows (P5.2)")
    _show(a, "show_transmission_queue", out, "A")
    out(f"  B: RECEIVE FROM StockQueue -> {len(got)} messages, sequence "
        f"{', '.join(str(m.message_sequence_number) for m in got)}: "
        + ", ".join(_text(m.message_body) for m in got))

    with warehouse.transaction():
        reply = warehouse.conversation(got[0].conversation_handle)
        reply.send('<StockReply reserved="8"/>', message_type="StockReply")
        reply.end()
    back = _receive(shop, "OrderQueue", 2, timeout)
    conv.end()
    out("  B: SEND StockReply, END CONVERSATION; A: RECEIVE FROM OrderQueue -> "
        + ", ".join(m.message_type_name.rsplit("/", 1)[-1] for m in back)
        + " (a reply, delivered by its broker identifier, R6); END CONVERSATION")
    for inst in (a, b):
        _wait(lambda inst=inst: inst.sql(
            "SELECT count(*) FROM sys.conversation_endpoints WHERE state_desc <> 'CLOSED'"
        ).fetchone()[0] == 0, timeout, "both sides to close")
    _show(a, "show_conversation_endpoints", out, "A")
    _show(b, "show_conversation_endpoints", out, "B")
    # the last fragments (acknowledgements) may still be on their way: wait for their counts
    counted = ("SELECT coalesce(sum(total_fragments_sent), 0), "
               "coalesce(sum(total_fragments_received), 0) "
               "FROM sys.dm_broker_connections")
    for inst, sent, received in ((a, 3, 2), (b, 2, 3)):
        _wait(lambda inst=inst, sent=sent, received=received: all(
            n >= want for n, want in zip(inst.sql(counted).fetchone(), (sent, received),
                                         strict=True)), timeout, "the connection tables")
    out("  one connection serves both ways (P2); what each side counted (C6; a fragment not "
        "acknowledged in time is sent again, P5.3)")
    _show_sql(a, _CONNECTIONS_SQL, out, "A")
    _show_sql(b, _CONNECTIONS_SQL, out, "B")
    out("  what happened on B's endpoint")
    _show_sql(b, _EVENTS_SQL, out, "B")


def _receive(db: Any, queue: str, count: int, timeout: float) -> list[Any]:
    import time

    got: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(got) < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the demo received {len(got)} of {count} messages from "
                               f"{queue} in {timeout:.0f} s")
        got += db.receive(queue, max_messages=10, timeout=0.5)
    return got


def _wait(predicate: Callable[[], Any], timeout: float, what: str) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"the demo waited {timeout:.0f} s for {what}")
        time.sleep(0.02)


def _text(body: bytes) -> str:
    return body.decode("utf-8", "replace")
