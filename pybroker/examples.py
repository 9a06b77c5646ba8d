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

from pybroker.instance import Instance
from pybroker.routing.decision import RouteDecision

EXAMPLES_FILE = Path(__file__).resolve().parent / "data" / "routing_examples.json"
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


# -- the demo's conversation (issue 3) -------------------------------------------------------

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


def _show(inst: Instance, query: str, out: Callable[[str], None]) -> None:
    """Run sql/demo/<query>.sql on its own cursor and print it and its rows."""
    from pybroker.sql_templates import render

    text = render(f"demo/{query}.sql")
    relation = inst.sql(text)
    columns, rows = relation.columns, relation.fetchall()
    sql = " ".join(line.strip() for line in text.splitlines() if not line.startswith("--"))
    out(f"    {sql}")
    cells = [["NULL" if v is None else str(v) for v in row] for row in rows]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    for row in [list(columns), *cells]:
        out("      " + "  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    if not rows:
        out("      (no rows)")
