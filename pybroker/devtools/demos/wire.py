"""``pybroker demo``'s last part: three of the routing seed's cases run end to end across
instance processes on 127.0.0.1, where the first part only decided them.

- Example 6, forwarding for one service (R7): the example's instance F (AdventureWorks2008R2
  holds ElsewhereService, msdb's ForwardingRoute sends it elsewhere, forwarding on) passes a
  message from a sender A on to the instance B its route names; only B keeps and
  acknowledges it, through F.
- Dynamic routing (R2.4, R8): A's database Orders has no route to RemoteOnlyService but one
  to ``SQL/ServiceBroker/BrokerConfiguration``: its conversation waits DELAYED while a
  MissingRoute request goes to the configuration service (the ready-made one,
  pybroker/apps/configuration_service.py, in A: it creates routes in its own instance);
  the service answers from its directory (a JSON file) with a route to B, and the waiting
  conversation leaves for B.
- Example 3, a route to a mirrored database (R9): A's OrderPartsRoute names partner P and
  mirror M (two processes whose database Parts shares one broker identifier); A asks both
  which is principal and sends to P; after a failover (SET PARTNER FAILOVER on both) P
  refuses, A asks again and the next conversation's message goes to M.

The demo's own process is the sender A (an instance file in a temporary directory); every
other instance is a child process (pybroker/devtools/demos/wire_child.py) with its own file, its
endpoint on a free port of 127.0.0.1, trusting the others by certificate. Every child is
stopped by its pid (asked to quit, then SIGTERM, then SIGKILL) and every wait is bounded.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pybroker
from pybroker.api.database import Database
from pybroker.api.instance import Instance
from pybroker.apps.configuration_service import DYNAMIC_ROUTING_SERVICE, ConfigurationService
from pybroker.devtools.bench.child import JsonLinesChild
from pybroker.devtools.demos.routing import load_examples
from pybroker.storage.templates import render

PARTS = ("forwarding", "dynamic", "mirror")
EXAMPLE_PARTS = {6: "forwarding", 3: "mirror"}  # ``pybroker demo --example N``
RETRY_SCALE = 0.05  # the demo's retransmissions and probes: 0.2 s, 0.4 s, ... (C5)
ENDPOINT_TSQL = ("CREATE ENDPOINT BrokerEndpoint STATE = STARTED AS TCP (LISTENER_PORT = 0, "
                 "LISTENER_IP = (127.0.0.1)) FOR SERVICE_BROKER ({options})")
Out = Callable[[str], None]


class _Instance(JsonLinesChild):
    """One instance in its own process (pybroker/devtools/demos/wire_child.py)."""

    def __init__(self, name: str, folder: Path) -> None:
        self.who = name
        env = dict(os.environ)
        root = str(Path(pybroker.__file__).resolve().parent.parent)  # this pybroker
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        super().__init__(f"instance {name}'s process",
                         [sys.executable, "-m", "pybroker.devtools.demos.wire_child",
                          str(folder / f"{name}.duckdb"), str(RETRY_SCALE)],
                         folder / f"{name}.stderr", env=env, cwd=root)
        self.address = self.certificate = ""
        self.pid = self.proc.pid

    def start_endpoint(self, forwarding: bool = False) -> None:
        options = "MESSAGE_FORWARDING = ENABLED" if forwarding else "ENCRYPTION = REQUIRED"
        self.ask("execute", database="master", tsql=ENDPOINT_TSQL.format(options=options))
        hello = self.ask("endpoint")
        self.address, self.certificate = hello["address"], hello["certificate"]

    def execute(self, database: str, tsql: str, out: Out | None = None) -> None:
        if out is not None:
            out(f"    {self.who}: {database}: {' '.join(tsql.split())}")
        self.ask("execute", database=database, tsql=tsql)

    def rows(self, query: str) -> tuple[list[str], list[list[str | None]]]:
        reply = self.ask("sql", query=query)
        return reply["columns"], reply["rows"]

    def show(self, template: str, out: Out) -> list[list[str | None]]:
        text = render(f"demo/{template}.sql")
        columns, rows = self.rows(text)
        _table(out, self.who, text, columns, rows)
        return rows

    def receive(self, database: str, queue: str, count: int, timeout: float) -> list[Any]:
        got = self.ask("receive", database=database, queue=queue, count=count,
                       timeout=timeout)["messages"]
        if len(got) < count:
            raise RuntimeError(f"the demo received {len(got)} of {count} messages from "
                               f"{self.who}'s {queue} in {timeout:.0f} s")
        return got


def run_across_processes(parts: Sequence[str] = PARTS, out: Out = print,
                         timeout: float = 30.0) -> dict[str, Any]:
    """Run ``parts`` (of PARTS) across instance processes, printing what happens; returns
    the decisive values of each (where each message arrived, through whom)."""
    wanted = [p for p in PARTS if p in parts]
    names = {"forwarding": ("F", "B"), "dynamic": ("B",), "mirror": ("P", "M")}
    result: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="pybroker-demo-processes-") as tmp:
        folder = Path(tmp)
        children: dict[str, _Instance] = {}
        a: Instance | None = None
        try:
            for part in wanted:  # started together: their start-up overlaps
                for name in names[part]:
                    if name not in children:
                        children[name] = _Instance(name, folder)
            a = Instance(folder / "A.duckdb", retry_scale=RETRY_SCALE)
            a.start_endpoint(0, "127.0.0.1")
            for name, child in children.items():
                child.start_endpoint(forwarding=name == "F")
                a.trust(name, child.certificate)
                child.ask("trust", name="A", certificate=a.certificate)
            for name, child in children.items():  # F and B, P and M know each other
                for other, peer in children.items():
                    if other != name:
                        child.ask("trust", name=other, certificate=peer.certificate)
            out("Across processes: the demo's process is instance A "
                f"({a.endpoint.address if a.endpoint else '?'}); "
                + "; ".join(f"{n} listens on {c.address} (process {c.pid})"
                            for n, c in children.items())
                + "; each in its own file, trusting the others' certificates (mutual TLS 1.3)")
            out("")
            if "forwarding" in wanted:
                result["forwarding"] = _forwarding(a, children["F"], children["B"], out,
                                                   timeout)
                out("")
            if "dynamic" in wanted:
                result["dynamic"] = _dynamic(a, children["B"], folder, out, timeout)
                out("")
            if "mirror" in wanted:
                result["mirror"] = _mirror(a, children["P"], children["M"], out, timeout)
                out("")
        finally:
            if a is not None:
                a.close()
            for child in children.values():
                child.stop()
    result["stopped"] = {name: child.proc.returncode for name, child in children.items()}
    return result


# -- example 6: forwarding ------------------------------------------------------------------


def _forwarding(a: Instance, f: _Instance, b: _Instance, out: Out,
                timeout: float) -> dict[str, Any]:
    example = next(e for e in load_examples() if e.number == 6)
    route = next(r for r in example.routes["msdb"] if r["name"] != "AutoCreatedLocal")
    service = route["remote_service_name"]
    out(f"Example 6 across processes: F is the example's instance, its msdb's {route['name']} "
        f"sends {service} to B (the seed's {route['address']}), forwarding on (R7)")
    out(f"    F: master: {ENDPOINT_TSQL.format(options='MESSAGE_FORWARDING = ENABLED')}")
    f.ask("database", name="AdventureWorks2008R2")
    for name in example.services["AdventureWorks2008R2"]:
        queue = tsql_name(f"{name}Queue")
        f.execute("AdventureWorks2008R2", f"CREATE QUEUE {queue}; CREATE SERVICE "
                  f"{tsql_name(name)} ON QUEUE {queue} ([DEFAULT])", out)
    f.execute("msdb", f"CREATE ROUTE {tsql_name(route['name'])} WITH SERVICE_NAME = "
              f"{tsql_string(service)}, ADDRESS = {tsql_string(b.address)}", out)
    b_db = b.ask("database", name="Elsewhere")["broker_instance"]
    b.execute("Elsewhere", "CREATE QUEUE ElsewhereQueue; CREATE SERVICE "
              f"{tsql_name(service)} ON QUEUE ElsewhereQueue ([DEFAULT])", out)
    sales = a.create_database("Sales")
    _execute(a, sales, "CREATE QUEUE SalesQueue; CREATE SERVICE SalesService ON QUEUE "
             f"SalesQueue; CREATE ROUTE ToForwarder WITH SERVICE_NAME = {tsql_string(service)}, "
             f"ADDRESS = {tsql_string(f.address)}", out)

    body = "<Shipment id='6'/>"
    with sales.transaction():
        sales.begin_dialog("SalesService", service).send(body)
    out(f"  A: BEGIN DIALOG to {service}, SEND {body}, COMMIT: it leaves for F, which holds "
        f"{service} too, but a message from outside is routed with msdb's table (R1.2)")
    got = b.receive("Elsewhere", "ElsewhereQueue", 1, timeout)
    _wait(lambda: _in_flight(a) == 0, timeout,
          "A's transmission queue to drain")
    far = a.sql("SELECT far_broker_instance::VARCHAR FROM sys.conversation_endpoints "
                "WHERE database_name = 'Sales'").fetchone()[0]
    whose = "B's database Elsewhere" if far == b_db else f"broker {far}"
    out(f"  B: RECEIVE FROM ElsewhereQueue -> {got[0][2]}; A's transmission queue is empty: "
        "B acknowledged it, back through F (only the final destination acknowledges, R7.3), "
        f"and A's conversation now names {whose} as its far broker instance (R5)")
    counted = render("demo/show_fragment_counts.sql")
    _wait(lambda: sum(int(r[3]) for r in f.rows(counted)[1]) >= 1, timeout,
          "F's connection table")
    out("  F kept nothing of it: its queues are empty, and its connections show one fragment "
        "in from A and one out to B (memory only, R7.3)")
    f_queues = f.show("show_every_queue_message", out)
    f_connections = f.show("show_fragment_counts", out)
    return {"received_at_b": got[0][2], "far_broker_instance": far, "b_broker_instance": b_db,
            "b_address": b.address, "f_address": f.address,
            "f_queue_rows": len(f_queues), "a_transmission_queue": _in_flight(a),
            "f_fragments": [(r[0], int(r[3]), int(r[4])) for r in f_connections]}


# -- dynamic routing --------------------------------------------------------------------------


def _dynamic(a: Instance, b: _Instance, folder: Path, out: Out,
             timeout: float) -> dict[str, Any]:
    service = "RemoteOnlyService"
    directory = folder / "directory.json"
    directory.write_text(json.dumps({service: b.address}), encoding="utf-8")
    out("Dynamic routing across processes: A's database Orders asks its configuration "
        f"service for a route to {service} (R2.4, R8)")
    b.execute("Elsewhere", "CREATE QUEUE RemoteOnlyQueue; CREATE SERVICE "
              f"{tsql_name(service)} ON QUEUE RemoteOnlyQueue ([DEFAULT])", out)
    configuration = a.create_database("Configuration")
    handler = ConfigurationService(directory)
    handler.install(configuration)
    out(f"    A: ConfigurationService({directory.name!r}).install(Configuration): the "
        f"ready-made handler, its directory {{{service!r}: {b.address!r}}}")
    orders = a.create_database("Orders")
    _execute(a, orders, "CREATE QUEUE OrdersQueue; CREATE SERVICE OrdersService ON QUEUE "
             "OrdersQueue; CREATE ROUTE ConfigurationRoute WITH SERVICE_NAME = "
             f"{tsql_string(DYNAMIC_ROUTING_SERVICE)}, ADDRESS = 'LOCAL'", out)
    body = "<Order id='8'/>"
    with orders.transaction():
        orders.begin_dialog("OrdersService", service).send(body)
    out(f"  A: BEGIN DIALOG to {service}, SEND {body}, COMMIT: no route names it, so it waits "
        "DELAYED and one MissingRoute request goes to the configuration service (R8.1)")
    _show_a(a, "show_every_transmission", out)
    _show_a(a, "show_every_queue_message", out)
    requests = a.sql("SELECT count(*) FROM sys.queue_messages WHERE database_name = "
                     "'Configuration' AND message_type_name LIKE '%/MissingRoute'"
                     ).fetchone()[0]

    def answered() -> bool:
        handler(configuration)  # what an activation procedure would run
        return any(r.remote_service_name == service for r in orders.routes())

    _wait(answered, timeout, "the configuration service's answer")
    out("  A: the configuration service RECEIVEs the request, creates a route with a LIFETIME "
        "in Orders and ends the request dialog (R8.2); the waiting conversation is routed "
        "again")
    _show_a(a, "show_network_routes", out)
    got = b.receive("Elsewhere", "RemoteOnlyQueue", 1, timeout)
    _wait(lambda: _in_flight(a) == 0, timeout,
          "A's transmission queue to drain")
    out(f"  B: RECEIVE FROM RemoteOnlyQueue -> {got[0][2]}; A's transmission queue is empty")
    route = next(r for r in orders.routes() if r.remote_service_name == service)
    return {"requests": requests, "route": route.name, "route_address": route.address,
            "b_address": b.address,
            "received_at_b": got[0][2],
            "a_transmission_queue": _in_flight(a)}


# -- example 3: a mirrored pair ---------------------------------------------------------------


def _mirror(a: Instance, p: _Instance, m: _Instance, out: Out,
            timeout: float) -> dict[str, Any]:
    example = next(e for e in load_examples() if e.number == 3)
    route = next(r for r in example.routes["AdventureWorks2008R2"]
                 if r["name"] != "AutoCreatedLocal")
    service = route["remote_service_name"]
    out(f"Example 3 across processes: A's {route['name']} sends {service} to P with MIRROR_"
        f"ADDRESS M (the seed's {route['address']} and {route['mirror_address']}), two "
        "processes whose database Parts shares one broker identifier (R9)")
    broker = str(uuid.uuid4())
    for child, partner in ((p, m), (m, p)):
        child.ask("database", name="Parts", broker_instance=broker)
        child.execute("Parts", "CREATE QUEUE PartsQueue; CREATE SERVICE "
                      f"{tsql_name(service)} ON QUEUE PartsQueue ([DEFAULT])", out)
        child.execute("master", "ALTER DATABASE Parts SET PARTNER = "
                      f"{tsql_string(partner.address)}", out)
    m.execute("master", "ALTER DATABASE Parts SET PARTNER FAILOVER", out)  # M: the mirror
    p.show("show_database_mirroring", out)
    m.show("show_database_mirroring", out)
    shop = a.create_database(route_db := "AdventureWorks2008R2")
    _execute(a, shop, "CREATE QUEUE InventoryQueue; CREATE SERVICE InventoryService ON QUEUE "
             f"InventoryQueue; CREATE ROUTE {tsql_name(route['name'])} WITH SERVICE_NAME = "
             f"{tsql_string(service)}, ADDRESS = {tsql_string(p.address)}, "
             f"MIRROR_ADDRESS = {tsql_string(m.address)}", out)

    def send(body: str) -> None:
        with shop.transaction():
            shop.begin_dialog("InventoryService", service).send(body)

    send(first := "<PartsOrder n='1'/>")
    out(f"  A: BEGIN DIALOG to {service}, SEND {first}: A asks P and M which is principal "
        "(a PROBE frame each) and sends to the principal only (R9.2)")
    at_p = p.receive("Parts", "PartsQueue", 1, timeout)
    _wait(lambda: _in_flight(a) == 0, timeout,
          "A's transmission queue to drain")
    shown = render("demo/show_mirrored_routes.sql")

    def principal() -> str | None:  # what A's mirrored route says (written once a second)
        row = a.sql(shown).fetchone()
        return None if row is None else row[2]

    _wait(lambda: principal() == p.address, timeout, "A's mirrored route state")
    out(f"  P: RECEIVE FROM PartsQueue -> {at_p[0][2]}")
    _show_a(a, "show_mirrored_routes", out)

    m.execute("master", "ALTER DATABASE Parts SET PARTNER FAILOVER", out)
    p.execute("master", "ALTER DATABASE Parts SET PARTNER FAILOVER", out)
    out("  a failover: M is the principal now, P the mirror (run on both, the new principal "
        "first; pybroker moves no data between them)")
    send(second := "<PartsOrder n='2'/>")
    out(f"  A: BEGIN DIALOG to {service}, SEND {second}: P refuses it (not the principal), A "
        "asks both again and M says it is (R9.3); a conversation begun after the failover "
        "continues at the new principal")
    at_m = m.receive("Parts", "PartsQueue", 1, timeout)
    _wait(lambda: _in_flight(a) == 0, timeout,
          "A's transmission queue to drain")
    _wait(lambda: principal() == m.address, timeout, "A's mirrored route state")
    out(f"  M: RECEIVE FROM PartsQueue -> {at_m[0][2]}; A's transmission queue is empty")
    _show_a(a, "show_mirrored_routes", out)
    events = _show_a(a, "show_mirrored_route_events", out)
    left_at_p = p.rows("SELECT count(*) FROM sys.queue_messages")[1][0][0]
    return {"database": route_db, "first_at_p": at_p[0][2], "second_at_m": at_m[0][2],
            "principal_after": principal(), "p_address": p.address, "m_address": m.address,
            "states": [r[1] for r in events], "left_at_p": int(left_at_p or 0)}


# -- helpers ----------------------------------------------------------------------------------


# Words T-SQL reserves that a Service Broker statement may meet where a name goes: such a
# name is written [bracketed] even though its letters would make a regular identifier.
_RESERVED = frozenset((
    "ADD", "ALL", "ALTER", "AND", "AS", "BEGIN", "BY", "CREATE", "DATABASE", "DEFAULT",
    "DELETE", "DROP", "END", "FOR", "FROM", "IN", "INSERT", "INTO", "IS", "KEY", "NOT", "NULL",
    "ON", "OR", "ORDER", "SELECT", "SET", "TABLE", "TO", "UPDATE", "WHERE", "WITH"))
_REGULAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_@#$]*")


def tsql_string(value: str) -> str:
    """``value`` as a T-SQL string literal: in single quotes, each quote inside doubled."""
    return "'" + value.replace("'", "''") + "'"


def tsql_name(name: str) -> str:
    """``name`` as a T-SQL identifier: as it is when it is a regular identifier, otherwise
    [bracketed] with each ``]`` inside doubled (a service name such as
    ``//Adventure-Works.com/Expenses`` is written ``[//Adventure-Works.com/Expenses]``)."""
    if _REGULAR_NAME.fullmatch(name) and name.upper() not in _RESERVED:
        return name
    return "[" + name.replace("]", "]]") + "]"


def _execute(inst: Instance, db: Database, tsql: str, out: Out) -> None:
    out(f"    A: {db.name}: {' '.join(tsql.split())}")
    db.execute(tsql)


def _show_a(a: Instance, template: str, out: Out) -> list[list[str | None]]:
    text = render(f"demo/{template}.sql")
    relation = a.sql(text)
    rows = [[None if v is None else str(v) for v in row] for row in relation.fetchall()]
    _table(out, "A", text, list(relation.columns), rows)
    return rows


def _table(out: Out, who: str, text: str, columns: list[str],
           rows: list[list[str | None]]) -> None:
    """A query and its rows, as the demo's other parts print them."""
    sql = " ".join(line.strip() for line in text.splitlines() if not line.startswith("--"))
    out(f"    {who}: {sql}")
    cells = [["NULL" if v is None else v for v in row] for row in rows]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    for row in [list(columns), *cells]:
        out("      " + "  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    if not rows:
        out("      (no rows)")


def _in_flight(inst: Instance) -> int:
    return int(inst.sql("SELECT count(*) FROM sys.transmission_queue").fetchone()[0])


def _wait(predicate: Callable[[], Any], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"the demo waited {timeout:.0f} s for {what}")
        time.sleep(0.05)
