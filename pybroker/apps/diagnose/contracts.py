"""The contract check of diagnose (D-CFG-011): a dialog begun on a contract its target
service does not accept. The dialogs are the initiators' endpoints not ended; where each
goes is asked of the initiating instance's engine (``Instance.route``, the R steps of
sql/routing/), then of msdb of every forwarder named it is sent through, until it reaches a
database that hosts the far service in one of the instances named. A dialog whose target is
in no instance named is not judged (that instance was not read)."""

from __future__ import annotations

from typing import Any

from pybroker.apps.diagnose.network import Network, Node
from pybroker.errors import BrokerError

_OUTSIDE = "outside"  # msdb's table routes what arrives from outside (R1.2)


def check(net: Network) -> None:
    for node in net.nodes:
        for dialog in node.target.rows("select_dialog_contracts"):
            target = _target(net, node, dialog)
            if target is None:
                continue
            there, database = target
            accepted = sorted(
                r["service_contract_name"] for r in there.target.rows("select_service_contracts")
                if r["database_name"] == database and r["service_name"] == dialog["far_service"])
            contract = dialog["service_contract_name"]
            if contract in accepted:
                continue
            net.add("D-CFG-011", node, dialog["database_name"],
                    [f"service {dialog['service_name']}", f"far service {dialog['far_service']}",
                     f"contract {contract}"],
                    endpoints=f"{dialog['endpoints']:,}", service=dialog["service_name"],
                    far_service=dialog["far_service"], contract=contract,
                    target_database=database, target=there.name,
                    accepted=("the contracts " + ", ".join(accepted)) if accepted
                    else "no contract (it can only initiate)")


def _target(net: Network, node: Node, dialog: dict[str, Any]) -> tuple[Node, str] | None:
    """The instance named and database where ``dialog``'s far service is delivered, routed
    from its database and on through the forwarders named (R1-R4, R7)."""
    service, broker = dialog["far_service"], dialog["far_broker_instance"]
    here: Node | None = node
    origin = dialog["database_name"]
    seen: set[str] = set()
    while here is not None and here.name not in seen:
        seen.add(here.name)
        try:
            decision = here.target.instance.route(service, broker_instance=broker,
                                                  origin=origin)
        except BrokerError:
            return None  # a name routing refuses: the begin would have failed
        if decision.outcome == "deliver":
            return (here, decision.database) if decision.database in here.hosts(service) \
                else None
        if decision.outcome != "send":
            return None  # DELAYED or dropped: D-CFG-001, D-CNV-005 and the routing rules say so
        there = net.at(decision.address)
        if there is not None and not there.forwarding:
            hosting = [d for d in there.hosts(service)
                       if broker is None or there.databases.get(d) == broker]
            return (there, hosting[0]) if hosting else None
        here, origin = there, _OUTSIDE
    return None
