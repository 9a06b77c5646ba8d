"""The routing checks of diagnose (D-RTE-*), asked of each instance's own routing process
(the R steps are written once, in sql/routing/; nothing here decides a route a second time),
every route of an instance in one query (explained.py).
"""

from __future__ import annotations

from typing import Any

from pybroker.apps.diagnose.explained import (
    PROBE_SERVICE,
    Step,
    chosen_step,
    explain_keys,
    explain_routes,
    key,
    matching_step,
    route_key,
)
from pybroker.apps.diagnose.network import Network, Node
from pybroker.core.routing.cache import DYNAMIC_ROUTING_SERVICE

# The R3 step that would choose a route of each kind (docs/codes.md, R3).
_CHOOSING_STEP = {"mirror": "R3.1", "LOCAL": "R3.2", "tcp": "R3.3", "TRANSPORT": "R3.4"}


def check(net: Network) -> None:
    _loops(net)
    for node in net.nodes:
        at = node.target.routing_now()
        explained = explain_routes(node.target, at, reached_wildcards_only=True)
        for database in node.databases:
            for route in node.live_routes(database):
                shadowed(net, node, route, explained[route_key(route, at)])
            _dynamic_before_wildcards(net, node, database)


def _step(steps: list[Any], code: str) -> Any | None:
    return next((s for s in steps if s.step == code), None)


def _kind(route: dict[str, Any]) -> str:
    if route["mirror_address"]:
        return "mirror"
    address = str(route["address"]).upper()
    return address if address in ("LOCAL", "TRANSPORT") else "tcp"


# -- D-RTE-001: forwarding loops ----------------------------------------------------------


def _loops(net: Network) -> None:
    services = sorted({r["remote_service_name"] for n in net.nodes for r in n.live_routes("msdb")
                       if r["remote_service_name"]} | {PROBE_SERVICE})
    found: set[tuple[str, tuple[str, ...]]] = set()
    hops = _forwarded(net, services)
    for service in services:
        for start in net.nodes:
            cycle = _cycle_from(start, service, hops)
            if cycle is None:
                continue
            names = [n.name for n, _ in cycle]
            turn = names.index(min(names))  # one cycle, whichever instance it was met from
            key = (service, tuple(names[turn:] + names[:turn]))
            if key in found:
                continue
            found.add(key)
            shown = "all services without a route of their own" if service == PROBE_SERVICE \
                else service
            last, route = cycle[-1]
            net.add("D-RTE-001", last, "msdb", [f"route {r}" for _, r in cycle],
                    service=shown, cycle=" -> ".join([*names, names[0]]),
                    instances=", ".join(names), route=route)


def _forwarded(net: Network, services: list[str]) -> dict[tuple[str, str], list[tuple[str, Node]]]:
    """(instance, service) -> (route, instance) for each route msdb of the instance may send
    the service by, when forwarding passes it on (R7) to an instance named: the msdb of each
    forwarder asked about every service at once."""
    hops: dict[tuple[str, str], list[tuple[str, Node]]] = {}
    for node in net.nodes:
        if not node.forwarding:
            continue
        at = node.target.routing_now()
        explained = explain_keys(node.target, [key("msdb", s, None, at) for s in services])
        routes = {r["name"]: r for r in node.live_routes("msdb")}
        for service in services:
            chosen = chosen_step(explained[key("msdb", service, None, at)])
            if chosen is None or chosen.step not in ("R3.1", "R3.3"):
                continue
            found = []
            for name in chosen.candidates:
                there = net.at(routes[name]["address"]) if name in routes else None
                if there is not None:
                    found.append((name, there))
            hops[(node.name, service)] = found
    return hops


def _cycle_from(start: Node, service: str, hops: dict[tuple[str, str], list[tuple[str, Node]]]
                ) -> list[tuple[Node, str]] | None:
    """The first cycle of forwarders met from ``start`` for ``service``, as (instance,
    route it forwards by) pairs, if there is one."""
    path: list[tuple[Node, str]] = []
    on_path: dict[str, int] = {}

    def walk(node: Node) -> list[tuple[Node, str]] | None:
        on_path[node.name] = len(path)
        for route, there in hops.get((node.name, service), ()):
            path.append((node, route))
            if there.name in on_path:
                return path[on_path[there.name]:]
            found = walk(there)
            if found is not None:
                return found
            path.pop()
        del on_path[node.name]
        return None

    return walk(start)


# -- D-RTE-002: routes never chosen -------------------------------------------------------


def shadowed(net: Network, node: Node, route: dict[str, Any], steps: list[Step]) -> None:
    """D-RTE-002 for ``route`` of ``node``, given the routing process traced for its key."""
    database = route["database_name"]
    matched = matching_step(steps)
    if matched is None or matched.step in ("R2.4", "R2.7"):  # R2.4: D-RTE-003
        return
    shown = route["remote_service_name"] or "services without a route of their own"
    if route["name"] not in matched.candidates:
        net.add("D-RTE-002", node, database, [f"route {route['name']}"],
                route=route["name"], service=shown, step=matched.step,
                winner=", ".join(matched.candidates),
                reason=f"{matched.step} matches first, so later R2 steps are not tried")
        return
    own = _step(steps, _CHOOSING_STEP[_kind(route)])
    chosen = chosen_step(steps)
    if chosen is not None and own is not None and own.result == "not reached" \
            and route["name"] in own.candidates:
        net.add("D-RTE-002", node, database, [f"route {route['name']}"],
                route=route["name"], service=shown, step=chosen.step,
                winner=", ".join(chosen.candidates),
                reason=f"{chosen.step} chooses before {own.step} is tried")


# -- D-RTE-003: R8.3's trap ---------------------------------------------------------------


def _dynamic_before_wildcards(net: Network, node: Node, database: str) -> None:
    routes = node.live_routes(database)
    if not any(r["remote_service_name"] == DYNAMIC_ROUTING_SERVICE for r in routes):
        return
    wildcards = [r["name"] for r in routes
                 if r["remote_service_name"] is None and r["broker_instance"] is None]
    if not wildcards:
        return
    dialogs = [r["far_service"] for r in node.target.rows("select_dialog_services")
               if r["database_name"] == database]
    hosted = {s["name"] for n in net.nodes for s in n.services}
    caught = []
    services = sorted((hosted | set(dialogs)) - {DYNAMIC_ROUTING_SERVICE})
    at = node.target.routing_now()
    explained = explain_keys(node.target, [key(database, s, None, at) for s in services])
    for service in services:
        steps = explained[key(database, service, None, at)]
        if getattr(matching_step(steps), "step", None) == "R2.4":
            caught.append(service)
    if caught:
        shown = ", ".join(caught[:5]) + (f" and {len(caught) - 5} more" if len(caught) > 5
                                         else "")
        net.add("D-RTE-003", node, database,
                [f"route {w}" for w in wildcards] + [f"service {s}" for s in caught[:5]],
                services=shown, wildcards=", ".join(wildcards))

