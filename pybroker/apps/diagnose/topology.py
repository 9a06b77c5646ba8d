"""``pybroker topology``: the network diagnose reads, as a picture: instances with their
broker endpoints, databases and services; routes as arrows (LOCAL, a network address, a
mirrored pair, TRANSPORT, dynamic routing, forwarding through msdb); the findings marked on
the elements they name. The picture is a model (elements, edges) drawn as Graphviz DOT or
Mermaid text by drawing.py.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pybroker.apps.diagnose.findings import Finding
from pybroker.apps.diagnose.network import Network, Node, normal_address
from pybroker.apps.diagnose.report import (
    DEFAULT_LEAK_AGE,
    DEFAULT_LEAK_COUNT,
    checked_network,
    naive_utc,
)
from pybroker.apps.diagnose.rules import SEVERITIES
from pybroker.apps.diagnose.targets import Target, open_target
from pybroker.core.routing.cache import DYNAMIC_ROUTING_SERVICE
from pybroker.errors import InvalidArgumentError

# Databases drawn only when they hold more than every instance's defaults.
_SYSTEM_DATABASES = ("master", "msdb")


@dataclass(slots=True)
class Element:
    """A box of the picture: ``kind`` instance, endpoint, database, service, address (a
    network address no instance named listens on) or transport; ``parent`` the element it
    is drawn inside (an instance for its endpoint and databases)."""

    id: str
    kind: str
    label: str
    parent: str | None = None
    codes: list[str] = field(default_factory=list)
    severity: str | None = None


@dataclass(slots=True)
class Edge:
    """An arrow: ``kind`` hosts (a database's service), arrivals (the endpoint hands what
    arrives to msdb, R1.2), local, network, forwarded (an msdb route, R7), mirror (R9),
    transport (R10.6), dynamic (R8) or partner (a line between the two databases of a
    mirrored pair, R9); ``route`` the route's name; ``dashed`` for an
    expired route or a link the other side does not trust."""

    source: str
    target: str
    kind: str
    label: str
    instance: str | None = None
    database: str | None = None
    route: str | None = None
    dashed: bool = False
    codes: list[str] = field(default_factory=list)
    severity: str | None = None


@dataclass(slots=True)
class Topology:
    elements: list[Element]
    edges: list[Edge]
    findings: list[Finding]

    def element(self, element_id: str) -> Element:
        return next(e for e in self.elements if e.id == element_id)


def topology(
    targets: Iterable[Any],
    *,
    tokens: Mapping[str, str] | None = None,
    now: dt.datetime | None = None,
    leak_age: dt.timedelta = DEFAULT_LEAK_AGE,
    leak_count: int = DEFAULT_LEAK_COUNT,
) -> Topology:
    """The picture of the instances ``targets`` name (read as ``pybroker.diagnose`` reads
    them), with diagnose's findings marked on the elements they name."""
    wanted = list(targets)
    if not wanted:
        raise InvalidArgumentError("topology needs at least one instance to read")
    opened: list[Target] = []
    try:
        for where in wanted:
            opened.append(open_target(where, tokens))
        net = checked_network(opened, naive_utc(now), leak_age, leak_count)
        return _Drawing(net).build()
    finally:
        for target in opened:
            target.close()


def _is_default_route(route: dict[str, Any]) -> bool:
    """AutoCreatedLocal's shape (R1.3): every database has one; drawn only when named."""
    return (route["remote_service_name"] is None and route["broker_instance"] is None
            and str(route["address"]).upper() == "LOCAL")


class _Drawing:
    def __init__(self, net: Network) -> None:
        self.net = net
        self.elements: list[Element] = []
        self.edges: list[Edge] = []
        self.ids: dict[tuple[str, ...], str] = {}
        # (instance, database, its sys.database_mirroring row): the mirrored pairs (R9)
        self.partners: list[tuple[Node, str, dict[str, Any]]] = []
        named = {(f.instance, f.database, o) for f in net.findings for o in f.objects}
        self.named_routes = {(i, d, o[6:]) for i, d, o in named if o.startswith("route ")}

    def build(self) -> Topology:
        for index, node in enumerate(self.net.nodes):
            self._instance(index, node)
        self._pairs()
        for node in self.net.nodes:
            self._routes(node)
        for finding in self.net.findings:
            self._mark(finding)
        return Topology(self.elements, self.edges, list(self.net.findings))

    def _add(self, key: tuple[str, ...], element: Element) -> str:
        self.ids[key] = element.id
        self.elements.append(element)
        return element.id

    def _instance(self, index: int, node: Node) -> None:
        inst = f"i{index}"
        self._add(("instance", node.name), Element(
            inst, "instance", node.name + ("\nforwarding on" if node.forwarding else "")))
        if node.endpoints:
            for e in node.endpoints:
                where = sorted(node.addresses)[0] if node.addresses else "a dynamic port"
                self._add(("endpoint", node.name), Element(
                    f"{inst}_ep", "endpoint", f"endpoint {e['name']}\n{where}\n{e['state_desc']}",
                    inst))
        else:
            self._add(("endpoint", node.name), Element(
                f"{inst}_ep", "endpoint", "no broker endpoint", inst))
        roles = {r["database_name"]: r for r in node.target.rows("select_mirroring")}
        for d, database in enumerate(sorted(node.databases)):
            services = [s for s in node.services if s["database_name"] == database]
            routes = [r for r in node.routes if r["database_name"] == database
                      and not _is_default_route(r)]
            if database in _SYSTEM_DATABASES and not services and not routes:
                continue
            role = roles.get(database)
            db_id = self._add(("database", node.name, database), Element(
                f"{inst}_d{d}", "database",
                f"{database}\n{str(node.databases[database])[:8]}"
                + (f"\n{role['role']} (R9)" if role else ""), inst))
            if role:
                self.partners.append((node, database, role))
            if database == "msdb":
                self.edges.append(Edge(f"{inst}_ep", db_id, "arrivals", "arrivals (R1.2)",
                                       node.name, database))
            for s, service in enumerate(services):
                svc_id = self._add(("service", node.name, database, service["name"]), Element(
                    f"{db_id}_s{s}", "service",
                    f"{service['name']}\nqueue {service['queue_name']}", inst))
                self.edges.append(Edge(db_id, svc_id, "hosts", "", node.name, database))

    def _target_of(self, address: str) -> str:
        there = self.net.at(address)
        if there is not None:
            return self.ids[("endpoint", there.name)]
        key = ("address", normal_address(address) or address)
        if key not in self.ids:
            self._add(key, Element(f"a{sum(e.kind == 'address' for e in self.elements)}",
                                   "address", f"{key[1]}\n(no instance named)"))
        return self.ids[key]

    def _routes(self, node: Node) -> None:
        for route in node.routes:
            database = route["database_name"]
            source = self.ids.get(("database", node.name, database))
            if source is None or (_is_default_route(route) and (
                    node.name, database, route["name"]) not in self.named_routes):
                continue
            service = route["remote_service_name"]
            label = f"{route['name']} [{service or 'any service'}]" + (
                " (expired)" if route["is_expired"] else "")
            address = str(route["address"])
            if address.upper() == "LOCAL":
                targets = [v for k, v in self.ids.items() if k[0] == "service"
                           and k[1] == node.name and k[3] == service] or [source]
                kinds = ["local"] * len(targets)
            elif address.upper() == "TRANSPORT":
                self._transport(node, route, label, source)
                continue
            else:
                kind = ("dynamic" if service == DYNAMIC_ROUTING_SERVICE else
                        "forwarded" if database == "msdb" else
                        "mirror" if route["mirror_address"] else "network")
                targets, kinds = [self._target_of(address)], [kind]
                if route["mirror_address"]:
                    targets.append(self._target_of(route["mirror_address"]))
                    kinds.append("mirror")
            for target, kind in zip(targets, kinds, strict=True):
                shown = label + (" mirror" if kind == "mirror" and len(targets) > 1
                                 and target == targets[-1] else "")
                self.edges.append(Edge(source, target, kind, shown, node.name, database,
                                       route["name"], dashed=bool(route["is_expired"])))

    def _pairs(self) -> None:
        """Each mirrored pair (R9) once, from the principal's side when it is named: a line
        between the databases of the two partners, where the partner's address is an
        instance named that has a database with the same broker identifier."""
        drawn: set[frozenset[str]] = set()
        for node, database, role in sorted(self.partners,
                                           key=lambda p: p[2]["role"] != "PRINCIPAL"):
            there = self.net.at(role["partner"])
            broker = node.databases[database]
            partner = next((d for d, b in (there.databases.items() if there else ())
                            if b == broker), None)
            other = None if there is None or partner is None else self.ids.get(
                ("database", there.name, partner))
            own = self.ids[("database", node.name, database)]
            if other is None or frozenset((own, other)) in drawn:
                continue
            drawn.add(frozenset((own, other)))
            self.edges.append(Edge(own, other, "partner", "mirrored pair (R9)", node.name,
                                   database))

    def _transport(self, node: Node, route: dict[str, Any], label: str, source: str) -> None:
        """A TRANSPORT route (R10.6): an arrow to each address that the service names it
        routes (the far services of the database's dialogs that its routing sends by this
        route, asked of the instance's engine) begin with, labelled with those names; to
        the TRANSPORT box when it routes none."""
        database = route["database_name"]
        names = sorted({r["far_service"] for r in node.target.rows("select_dialog_services")
                        if r["database_name"] == database
                        and str(r["far_service"]).lower().startswith("tcp://")})
        by_address: dict[str, list[str]] = {}
        for name in names:
            decision = node.target.instance.route(name, origin=database)
            if decision.route == route["name"] and decision.address:
                by_address.setdefault(decision.address, []).append(name)
        dashed = bool(route["is_expired"])
        for address, shown in sorted(by_address.items()):
            more = f" and {len(shown) - 2} more" if len(shown) > 2 else ""
            self.edges.append(Edge(
                source, self._target_of(address), "transport",
                f"{route['name']} [TRANSPORT: {', '.join(shown[:2])}{more}]", node.name,
                database, route["name"], dashed=dashed))
        if not by_address:
            if ("transport",) not in self.ids:
                self._add(("transport",), Element(
                    "transport", "transport", "TRANSPORT\n(the address in the service name)"))
            self.edges.append(Edge(source, "transport", "transport", label, node.name,
                                   database, route["name"], dashed=dashed))

    def _mark(self, finding: Finding) -> None:
        marked: list[Element | Edge] = []
        if finding.code == "D-RTE-001":
            marked += self._cycle(finding)
        for shown in finding.objects if not marked else ():
            kind, _, name = shown.partition(" ")
            if kind == "route":
                marked += [e for e in self.edges if e.route == name
                           and e.instance == finding.instance
                           and e.database == finding.database]
            elif kind == "service":
                ids = {v for k, v in self.ids.items() if k[0] == "service"
                       and k[1] == finding.instance and k[3] == name
                       and finding.database in (None, k[2])}
                marked += [e for e in self.elements if e.id in ids]
            elif kind == "queue":
                ids = {v for k, v in self.ids.items() if k[0] == "service"
                       and k[1] == finding.instance and k[2] == finding.database
                       and self._queue_of(finding.instance, k[2], k[3]) == name}
                marked += [e for e in self.elements if e.id in ids]
            elif kind == "endpoint":
                marked.append(self.element(self.ids[("endpoint", finding.instance)]))
            elif kind == "peer":  # D-CFG-009: the links between the two, dashed
                for edge in self._links(finding.instance, name):
                    edge.dashed = True
                    marked.append(edge)
        if not marked:
            key = ("database", finding.instance, finding.database or "")
            marked.append(self.element(self.ids.get(key) or self.ids[
                ("instance", finding.instance)]))
        for item in marked:
            if finding.code not in item.codes:
                item.codes.append(finding.code)
            if item.severity is None or SEVERITIES.index(finding.severity) < SEVERITIES.index(
                    item.severity):
                item.severity = finding.severity

    def element(self, element_id: str) -> Element:
        return next(e for e in self.elements if e.id == element_id)

    def _cycle(self, finding: Finding) -> list[Edge]:
        """D-RTE-001's routes, each in the msdb of the instance before it on the loop: the
        finding is the loop's last instance's, its objects the routes in the loop's order
        (routing.py), so the walk starts where the last route points."""
        owner = {v: k[1] for k, v in self.ids.items() if k[0] == "endpoint"}
        routes = [o[6:] for o in finding.objects if o.startswith("route ")]
        found, instance = [], finding.instance
        for name in routes[-1:] + routes[:-1]:
            edge = next((e for e in self.edges if e.kind == "forwarded"
                         and e.instance == instance and e.route == name), None)
            if edge is None or edge.target not in owner:
                return found
            found.append(edge)
            instance = owner[edge.target]
        return found

    def _queue_of(self, instance: str, database: str, service: str) -> str | None:
        node = next(n for n in self.net.nodes if n.name == instance)
        return next((s["queue_name"] for s in node.services
                     if s["database_name"] == database and s["name"] == service), None)

    def _links(self, one: str, other: str) -> list[Edge]:
        ends = {one: self.ids[("endpoint", one)], other: self.ids[("endpoint", other)]}
        return [e for e in self.edges if e.kind not in ("hosts", "arrivals") and (
            (e.instance == one and e.target == ends[other])
            or (e.instance == other and e.target == ends[one]))]
