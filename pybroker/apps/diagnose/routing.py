"""The routing checks of diagnose (D-RTE-*), asked of each instance's own routing engine
through ``Instance.explain`` (the R steps are written once, in sql/routing/; nothing here
decides a route a second time)."""

from __future__ import annotations

from typing import Any

from pybroker.apps.diagnose.network import Network, Node
from pybroker.core.routing.cache import DYNAMIC_ROUTING_SERVICE
from pybroker.core.routing.engine import OUTSIDE

# The service name a wildcard route is asked about: one no route or service names (it holds
# a character a service name may, and "any" in words).
PROBE_SERVICE = "pybroker/diagnose/any-other-service"

# An R2 step's results that found no candidates.
_NOTHING = ("no route", "not applicable", "not reached")

# The R3 step that would choose a route of each kind (docs/codes.md, R3).
_CHOOSING_STEP = {"mirror": "R3.1", "LOCAL": "R3.2", "tcp": "R3.3", "TRANSPORT": "R3.4"}


def check(net: Network) -> None:
    _loops(net)
    for node in net.nodes:
        for database in node.databases:
            _shadowed(net, node, database)
            _dynamic_before_wildcards(net, node, database)


def _origin(database: str) -> str:
    return OUTSIDE if database == "msdb" else database  # R1.2: msdb routes what comes in


def _explain(node: Node, service: str, database: str, broker: str | None = None) -> list[Any]:
    return node.target.instance.explain(service, broker_instance=broker,
                                        origin=_origin(database))


def _step(steps: list[Any], code: str) -> Any:
    return next(s for s in steps if s.step == code)


def matching_step(steps: list[Any]) -> Any | None:
    """The R2 step that found the candidates (the first that found anything, R2)."""
    return next((s for s in steps if s.step.startswith("R2.") and s.result not in _NOTHING),
                None)


def _chosen(steps: list[Any]) -> Any | None:
    return next((s for s in steps if s.step.startswith("R3.") and s.result == "chosen"), None)


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
    for service in services:
        for start in net.nodes:
            cycle = _cycle_from(net, start, service)
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


def _next_hops(net: Network, node: Node, service: str) -> list[tuple[str, Node]]:
    """(route, instance) for each route msdb of ``node`` may send ``service`` by, when
    forwarding passes it on (R7) to an instance named."""
    if not node.forwarding:
        return []
    chosen = _chosen(_explain(node, service, "msdb"))
    if chosen is None or chosen.step not in ("R3.1", "R3.3"):
        return []
    routes = {r["name"]: r for r in node.live_routes("msdb")}
    hops = []
    for name in chosen.candidates:
        there = net.at(routes[name]["address"]) if name in routes else None
        if there is not None:
            hops.append((name, there))
    return hops


def _cycle_from(net: Network, start: Node, service: str) -> list[tuple[Node, str]] | None:
    """The first cycle of forwarders met from ``start`` for ``service``, as (instance,
    route it forwards by) pairs, if there is one."""
    path: list[tuple[Node, str]] = []
    on_path: dict[str, int] = {}

    def walk(node: Node) -> list[tuple[Node, str]] | None:
        on_path[node.name] = len(path)
        for route, there in _next_hops(net, node, service):
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


def _shadowed(net: Network, node: Node, database: str) -> None:
    for route in node.live_routes(database):
        service = route["remote_service_name"] or PROBE_SERVICE
        steps = _explain(node, service, database, route["broker_instance"])
        matched = matching_step(steps)
        if matched is None or matched.step in ("R2.4", "R2.7"):  # R2.4: D-RTE-003
            continue
        shown = route["remote_service_name"] or "services without a route of their own"
        if route["name"] not in matched.candidates:
            net.add("D-RTE-002", node, database, [f"route {route['name']}"],
                    route=route["name"], service=shown, step=matched.step,
                    winner=", ".join(matched.candidates),
                    reason=f"{matched.step} matches first, so later R2 steps are not tried")
            continue
        own = _step(steps, _CHOOSING_STEP[_kind(route)])
        chosen = _chosen(steps)
        if chosen is not None and own.result == "not reached" and route["name"] in own.candidates:
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
    for service in sorted((hosted | set(dialogs)) - {DYNAMIC_ROUTING_SERVICE}):
        steps = _explain(node, service, database)
        if getattr(matching_step(steps), "step", None) == "R2.4":
            caught.append(service)
    if caught:
        shown = ", ".join(caught[:5]) + (f" and {len(caught) - 5} more" if len(caught) > 5
                                         else "")
        net.add("D-RTE-003", node, database,
                [f"route {w}" for w in wildcards] + [f"service {s}" for s in caught[:5]],
                services=shown, wildcards=", ".join(wildcards))

