"""The configuration checks of diagnose (D-CFG-*): ssbdiagnose CONFIGURATION's questions,
asked of every instance named at once."""

from __future__ import annotations

import datetime as dt
import importlib.machinery
import importlib.util
from typing import Any

from pybroker.apps.diagnose.explained import matching_step
from pybroker.apps.diagnose.network import Network, Node, normal_address
from pybroker.core.activation.procedure import is_python_callable
from pybroker.core.routing.engine import OUTSIDE
from pybroker.core.tsql.procedure_calls import split_name
from pybroker.core.tsql.procedure_parser import DEFAULT_SCHEMA
from pybroker.core.wire.certificates import certificate_info
from pybroker.errors import BrokerError

EXPIRY_WARNING = dt.timedelta(days=30)


def check(net: Network) -> None:
    for node in net.nodes:
        _unhosted_services(net, node)
        _routes_back(net, node)
        _queues(net, node)
        _endpoints(net, node)
        _unknown_addresses(net, node)
        _certificates(net, node)
        _trust(net, node)
        _forwarding_off(net, node)


def _network_routes(node: Node):
    """(database, route, address) of every route routing reads that names a network
    address."""
    for database in node.databases:
        for route in node.live_routes(database):
            address = normal_address(route["address"])
            if address is not None:
                yield database, route, address


def _unhosted_services(net: Network, node: Node) -> None:
    for database, route, address in _network_routes(node):
        service = route["remote_service_name"]
        there = net.at(address)
        if service is None or there is None or there.hosts(service) or there.forwarding:
            continue  # a forwarder passes it on: where to is its own routes' question
        net.add("D-CFG-001", node, database, [f"route {route['name']}", f"service {service}"],
                service=service, address=address, route=route["name"])


def _initiator_services(node: Node, database: str, far_service: str) -> list[str]:
    """The services of ``database`` that begin dialogs with ``far_service``: those its
    conversation endpoints show, else every service of the database."""
    begun = [r["service_name"] for r in node.target.rows("select_dialog_services")
             if r["database_name"] == database and r["far_service"] == far_service]
    return sorted(set(begun)) or sorted(s["name"] for s in node.services
                                        if s["database_name"] == database)


def _routes_back(net: Network, node: Node) -> None:
    seen: set[tuple[str, str, str, str]] = set()
    for database, route, address in _network_routes(node):
        service = route["remote_service_name"]
        there = net.at(address)
        if service is None or there is None or there is node or database == "msdb" \
                or _passed_on(there, service):
            continue
        for far_service in _initiator_services(node, database, service):
            for target_database in there.hosts(service):
                key = (there.name, target_database, service, far_service)
                if key in seen:
                    continue
                seen.add(key)
                broker = node.databases[database]
                steps = there.target.instance.explain(
                    far_service, broker_instance=broker, origin=target_database)
                if not _routed(steps):
                    own = sorted(node.addresses)
                    net.add("D-CFG-002", there, target_database,
                            [f"service {service}", f"far service {far_service}"],
                            service=service, far_service=far_service,
                            broker_instance=broker,
                            address=own[0] if own else "tcp://HOST:PORT")


def _passed_on(node: Node, service: str) -> bool:
    """Whether a message for ``service`` that arrives at ``node`` is sent on by a network
    route of its msdb (R1.2, R7) rather than delivered to a database of its own: then the
    target, and its route back, are further on (a forwarder that also hosts the service,
    as example 6's does)."""
    if not node.forwarding:
        return False
    chosen = next((s for s in node.target.instance.explain(service, origin=OUTSIDE)
                   if s.step.startswith("R3.") and s.result == "chosen"), None)
    return chosen is not None and chosen.step in ("R3.1", "R3.3")


def _routed(steps: list[Any]) -> bool:
    """Whether an explained decision chose a route or asks the dynamic routing service."""
    matched = matching_step(steps)
    return matched is not None and (matched.step == "R2.4" or any(
        s.step.startswith("R3.") and s.result == "chosen" for s in steps))


def _queues(net: Network, node: Node) -> None:
    for queue in node.queues:
        database, name = queue["database_name"], queue["name"]
        services = [s["name"] for s in node.services
                    if s["database_name"] == database and s["queue_name"] == name]
        if not queue["is_receive_enabled"]:
            net.add("D-CFG-003", node, database, [f"queue {name}"], queue=name,
                    services=", ".join(services) or "none")
        procedure = queue["activation_procedure"]
        if not (queue["is_activation_enabled"] and procedure):
            continue
        if is_python_callable(procedure):
            module = procedure.partition(":")[0]
            if not module_found(module):
                net.add("D-CFG-004", node, database, [f"queue {name}"], queue=name,
                        procedure=procedure, module=module)
        elif not _procedure_exists(node, database, procedure):
            net.add("D-CFG-012", node, database, [f"queue {name}", f"procedure {procedure}"],
                    queue=name, procedure=procedure)


def _procedure_exists(node: Node, database: str, procedure: str) -> bool:
    """Whether the stored procedure ``procedure`` (proc, schema.proc or db.schema.proc)
    exists where activation looks for it: in the queue's own database, schema dbo when none
    is named (kernel/activation.py resolves it so at activation time)."""
    try:
        named_database, schema, name = split_name(procedure)
    except BrokerError:
        return False
    if named_database is not None and named_database.lower() != database.lower():
        return False
    return (database.lower(), (schema or DEFAULT_SCHEMA).lower(), name.lower()) in node.procedures


def module_found(module: str) -> bool:
    """Whether ``module`` (a dotted name) is found by the import system's finders, without
    importing it or its packages: each part is looked for in its package's search path."""
    parts = module.split(".")
    if not all(part.isidentifier() for part in parts):
        return False
    try:
        spec = importlib.util.find_spec(parts[0])  # a top-level name imports nothing
    except (ImportError, ValueError):
        return False
    for part in parts[1:]:
        if spec is None or spec.submodule_search_locations is None:
            return False
        spec = importlib.machinery.PathFinder.find_spec(
            part, list(spec.submodule_search_locations))
    return spec is not None


def _endpoints(net: Network, node: Node) -> None:
    for endpoint in node.endpoints:
        if endpoint["state_desc"] != "STARTED":
            net.add("D-CFG-005", node, None, [f"endpoint {endpoint['name']}"],
                    endpoint=endpoint["name"], state=endpoint["state_desc"])


def _unknown_addresses(net: Network, node: Node) -> None:
    for database in node.databases:
        for route in node.live_routes(database):
            for column, clause in (("address", "ADDRESS"), ("mirror_address", "MIRROR_ADDRESS")):
                address = normal_address(route[column])
                if address is not None and net.at(address) is None:
                    shown = f"route {route['name']}" + (" (MIRROR_ADDRESS)" if column ==
                                                        "mirror_address" else "")
                    net.add("D-CFG-006", node, database, [shown], route=route["name"],
                            address=address, clause=clause)


def _certificates(net: Network, node: Node) -> None:
    owners = {_thumbprint(n): n.name for n in net.nodes}
    for cert in node.trusted:
        expiry = cert["expiry_date"]
        # the instance named whose own endpoint certificate it is renews it (its fix)
        fields = {"peer": cert["subject"], "certificate": cert["name"],
                  "expiry": f"{expiry:%Y-%m-%d %H:%M}",
                  "owner": owners.get(cert["thumbprint"], "PEER_FILE")}
        if expiry <= net.now:
            net.add("D-CFG-007", node, None, [f"certificate {cert['name']}"], **fields)
        elif expiry <= net.now + EXPIRY_WARNING:
            net.add("D-CFG-008", node, None, [f"certificate {cert['name']}"], **fields)


def _thumbprint(node: Node) -> str | None:
    if node.certificate is None:
        return None
    try:
        return certificate_info(node.certificate).fingerprint
    except BrokerError:
        return None


def _trust(net: Network, node: Node) -> None:
    peers: dict[str, str] = {}
    for _, _, address in _network_routes(node):
        there = net.at(address)
        if there is not None and there is not node:
            peers.setdefault(there.name, address)
    for peer_name in sorted(peers):
        peer = next(n for n in net.nodes if n.name == peer_name)
        for untrusting, untrusted in ((node, peer), (peer, node)):
            thumbprint = _thumbprint(untrusted)
            if thumbprint is None or thumbprint not in {
                    c["thumbprint"] for c in untrusting.trusted}:
                net.add("D-CFG-009", untrusting, None, [f"peer {untrusted.name}"],
                        untrusting=untrusting.name, untrusted=untrusted.name)


def _forwarding_off(net: Network, node: Node) -> None:
    if node.forwarding:
        return
    for route in node.live_routes("msdb"):
        address = normal_address(route["address"])
        if address is not None and address not in node.addresses:
            net.add("D-CFG-010", node, "msdb", [f"route {route['name']}"],
                    route=route["name"], address=address,
                    service=route["remote_service_name"] or "every service")
