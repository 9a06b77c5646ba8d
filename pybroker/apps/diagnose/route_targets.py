"""The routing checks of diagnose about what a route leads to (D-RTE-004 to D-RTE-007):
when it stops leading anywhere (its LIFETIME against the conversations it routes), the
partners of a mirrored pair, the addresses TRANSPORT takes from service names. Routing
questions go to each instance's own routing SQL (sql/routing/, every key of an instance in
one query through explained.py), never decided a second time."""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

from pybroker.apps.diagnose.explained import (
    Step,
    chosen_step,
    explain_keys,
    key,
    matching_step,
)
from pybroker.apps.diagnose.network import Network, Node, normal_address
from pybroker.core.routing.cache import DYNAMIC_ROUTING_SERVICE

# How far past a route's expiry the decision without it is asked for.
_JUST_AFTER = dt.timedelta(milliseconds=1)

# R10.2: the longest LIFETIME a route may be given, in seconds.
_LONGEST_LIFETIME = 2**31 - 1


def check(net: Network) -> None:
    for node in net.nodes:
        _expiring_routes(net, node)
        _mirror_partners(net, node)
        _transport_names(net, node)


# -- D-RTE-004: routes that expire before their conversations ----------------------------


def _expiring_routes(net: Network, node: Node) -> None:
    routes = {(r["database_name"], r["name"]): r for r in node.routes if not r["is_expired"]}
    if not any(r["lifetime"] is not None for r in routes.values()):
        return
    groups = node.target.rows("select_endpoint_lifetimes")
    at = node.target.routing_now()

    def group_key(group: dict[str, Any]) -> Any:
        return key(group["database_name"], group["far_service"], group["far_broker_instance"],
                   at)

    groups = outlivable(routes, groups)
    explained = explain_keys(node.target, [group_key(g) for g in groups])
    # each route a group's conversations take that expires before the latest of them lives
    outlived = []
    for group in groups:
        chosen = chosen_step(explained[group_key(group)])
        latest = group["latest"]
        for name in chosen.candidates if chosen is not None else ():
            route = routes.get((group["database_name"], name))
            if route is None or route["lifetime"] is None or latest is None \
                    or route["lifetime"] >= latest:
                continue
            outlived.append((group, route))
    # what routing does for them once the route expired, every one in one query
    afterwards = explain_keys(node.target, [_after_key(g, r) for g, r in outlived])
    others = {(r["database_name"], r["name"]): r for r in node.routes}
    reported: set[tuple[str, str]] = set()
    for group, route in outlived:
        database, name = group["database_name"], route["name"]
        if (database, name) in reported:
            continue
        after = after_expiry(others, database, route, afterwards[_after_key(group, route)])
        if after is None:
            continue
        reported.add((database, name))
        service, latest = group["far_service"], group["latest"]
        net.add("D-RTE-004", node, database, [f"route {name}", f"service {service}"],
                route=name, service=service, expiry=f"{route['lifetime']:%Y-%m-%d %H:%M:%S}",
                latest=f"{latest:%Y-%m-%d %H:%M:%S}", endpoints=f"{group['endpoints']:,}",
                after=after, remedy=_remedy(route, latest, net.now))


def outlivable(routes: dict[tuple[str, str], dict[str, Any]],
               groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The groups of conversations (rows of select_endpoint_lifetimes.sql) that a route of
    ``routes`` (by database and name, not expired) with a LIFETIME could be outlived by:
    one that names the group's far service, or no service (a wildcard), and expires
    before the latest of them lives. Only such a route can be one a group takes (R2: the
    candidates are the routes naming the service, then the wildcards), so routing is asked
    about these groups alone, not one group more than the rule reads."""
    earliest: dict[tuple[str, str | None], dt.datetime] = {}
    for r in routes.values():
        if r["lifetime"] is not None:
            at = (r["database_name"], r["remote_service_name"])
            earliest[at] = min(earliest.get(at, r["lifetime"]), r["lifetime"])
    return [g for g in groups if g["latest"] is not None and any(
        (first := earliest.get((g["database_name"], service))) is not None
        and first < g["latest"] for service in (g["far_service"], None))]


def _after_key(group: dict[str, Any], route: dict[str, Any]) -> Any:
    """The key of ``group``'s conversations routed just after ``route`` expired."""
    return key(group["database_name"], group["far_service"], group["far_broker_instance"],
               route["lifetime"] + _JUST_AFTER)


def _remedy(route: dict[str, Any], latest: dt.datetime, now: dt.datetime) -> str:
    """The route's LIFETIME past ``latest`` (R10.2 allows up to 2^31 - 1 seconds), or the
    route made again without one when that is not enough."""
    seconds = max(math.ceil((latest - now).total_seconds()) + 1, 1)
    name = route["name"]
    if seconds <= _LONGEST_LIFETIME:
        return f"ALTER ROUTE [{name}] WITH LIFETIME = {seconds}"
    clauses = [f"SERVICE_NAME = '{route['remote_service_name']}'"] if route[
        "remote_service_name"] else []
    if route["broker_instance"]:
        clauses.append(f"BROKER_INSTANCE = '{route['broker_instance']}'")
    clauses.append(f"ADDRESS = '{route['address']}'")
    if route["mirror_address"]:
        clauses.append(f"MIRROR_ADDRESS = '{route['mirror_address']}'")
    return f"DROP ROUTE [{name}]; CREATE ROUTE [{name}] WITH {', '.join(clauses)}"


def after_expiry(others: dict[tuple[str, str], dict[str, Any]], database: str,
                  route: dict[str, Any], steps: list[Step]) -> str | None:
    """What routing does for the conversation once ``route`` expired (``steps``: the
    routing process traced just after), in words; None when that is harmless: another
    route to the same address, or the dynamic routing service asked again (R2.4: a route it
    made with a LIFETIME is asked for again, by design). ``others``: the instance's routes by
    (database, name)."""
    matched = matching_step(steps)
    if matched is not None and matched.step == "R2.4":
        return None
    chosen = chosen_step(steps)
    if chosen is None:
        return "DELAYED: no route is chosen (R2.7, R3.5) and they wait in the transmission queue"
    for name in chosen.candidates:
        other = others.get((database, name))
        if other is not None and _same_address(other["address"], route["address"]):
            return None
    return f"sent by route {', '.join(chosen.candidates)} instead ({chosen.step})"


def _same_address(one: str, other: str) -> bool:
    return (normal_address(one) or str(one).upper()) == (normal_address(other)
                                                         or str(other).upper())


# -- D-RTE-005, D-RTE-006: the partners of a mirrored pair -------------------------------


def _mirror_partners(net: Network, node: Node) -> None:
    for route in node.routes:
        if route["is_expired"] or not route["mirror_address"]:
            continue
        service, broker = route["remote_service_name"], route["broker_instance"]
        partners = [(address, net.at(address)) for address in
                    (route["address"], route["mirror_address"])]
        if any(there is None for _, there in partners):
            continue  # a partner not named: D-CFG-006 says so; its answer is unknown here
        answers = {}
        for address, there in partners:
            rows = there.target.rows("select_probe_role", service_name=service,
                                     broker_instance=broker)
            answers[address] = rows[0]["role"] if rows else ""
        fields = {"route": route["name"], "service": service, "address": route["address"],
                  "mirror_address": route["mirror_address"],
                  "broker": f" and broker identifier {broker}" if broker else ""}
        for (address, there), (other, _) in zip(partners, reversed(partners), strict=True):
            if not answers[address]:
                net.add("D-RTE-005", node, route["database_name"],
                        [f"route {route['name']}", f"peer {there.name}"], partner=there.name,
                        partner_address=address, other_address=other, **fields)
        if "PRINCIPAL" not in answers.values() and any(answers.values()):
            shown = ", ".join(f"{a}: {answers[a] or 'none'}" for a, _ in partners)
            net.add("D-RTE-006", node, route["database_name"], [f"route {route['name']}"],
                    answers=shown, **fields)


# -- D-RTE-007: TRANSPORT names that do not resolve --------------------------------------


def _transport_names(net: Network, node: Node) -> None:
    for database in node.databases:
        transport = {r["name"] for r in node.live_routes(database)
                     if str(r["address"]).upper() == "TRANSPORT"}
        if not transport:
            continue
        services = {r["far_service"] for r in node.target.rows("select_far_services")
                    if r["database_name"] == database}
        services |= {s["name"] for n in net.nodes for s in n.services
                     if s["name"].lower().startswith("tcp://")}
        wanted = sorted(services - {DYNAMIC_ROUTING_SERVICE})
        at = node.target.routing_now()
        explained = explain_keys(node.target, [key(database, s, None, at) for s in wanted])
        for service in wanted:
            steps = explained[key(database, service, None, at)]
            matched = matching_step(steps)
            ours = sorted(transport & set(matched.candidates)) if matched is not None else []
            if not ours:
                continue
            chosen = chosen_step(steps)
            reason = None
            if chosen is None:
                reason = ("the name does not begin with an address tcp://HOST:PORT, so "
                          "TRANSPORT finds none in it")
            elif chosen.step == "R3.4":
                parts = service.split("/", 3)  # tcp:, '', host:port, name
                address = normal_address(f"tcp://{parts[2]}") if len(parts) > 2 else None
                there = net.at(address)
                if there is not None and not there.hosts(service) and not there.forwarding:
                    reason = (f"the address in the name, {address}, is {there.name}'s, which "
                              "has no service of that name")
            if reason is not None:
                net.add("D-RTE-007", node, database, [f"route {ours[0]}", f"service {service}"],
                        route=ours[0], service=service, reason=reason)
