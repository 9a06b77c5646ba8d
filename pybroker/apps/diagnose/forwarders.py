"""D-RTE-008: a forwarder that others route services to, but whose msdb has no route on for
them. A message that arrives from outside is routed with msdb's table (R1.2); when nothing
there chooses a route and the service is not in the instance, it is dropped (R3.5, remote
origin) and its sender retries forever. Each forwarder's own routing process decides it
(``Instance.route``), nothing here decides a route a second time.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pybroker.apps.diagnose.network import Network, Node, normal_address
from pybroker.core.routing.engine import OUTSIDE


def check(net: Network) -> None:
    for forwarder in net.nodes:
        if not forwarder.forwarding or not forwarder.addresses:
            continue
        sent: dict[tuple[str, str | None], list[str]] = {}
        for sender, database, route in _routes_to(net, forwarder):
            key = (route["remote_service_name"], route["broker_instance"])
            sent.setdefault(key, []).append(
                f"{sender.name} (route {route['name']} of {database})")
        for (service, broker_instance), senders in sorted(
                sent.items(), key=lambda item: (item[0][0], item[0][1] or "")):
            decision = forwarder.target.instance.route(
                service, broker_instance=broker_instance, origin=OUTSIDE)
            if decision.outcome != "drop":
                continue
            hosts = sorted(a for n in net.hosting(service) if n is not forwarder
                           for a in n.addresses)
            net.add("D-RTE-008", forwarder, "msdb", [f"service {service}"],
                    service=service, senders=", ".join(senders),
                    address=hosts[0] if hosts else "tcp://HOST:PORT")


def _routes_to(net: Network, forwarder: Node) -> Iterator[tuple[Node, str, dict[str, Any]]]:
    """(sender, database, route) of every live route of another instance named that sends
    a named service to the forwarder's address: from its databases, and from its msdb when
    it forwards too (a chain of forwarders; msdb routes of an instance that does not forward
    are D-CFG-010's)."""
    for sender in net.nodes:
        if sender is forwarder:
            continue
        for database in sender.databases:
            if database == "msdb" and not sender.forwarding:
                continue
            for route in sender.live_routes(database):
                if route["remote_service_name"] is None:
                    continue  # a wildcard: which services take it is the sender's traffic
                if normal_address(route["address"]) in forwarder.addresses:
                    yield sender, database, route
