"""The contract check of diagnose (D-CFG-011): a dialog begun on a contract its target
service does not accept. The dialogs are the initiators' endpoints not ended; where each
goes is asked of the initiating instance's routing (sql/routing/, every possible decision of
every dialog of an instance in one query through explained.py: what ``Instance.route``
draws from), then of msdb of every forwarder named it is sent through, until it reaches a
database that hosts the far service in one of the instances named. A dialog whose target is
in no instance named is not judged (that instance was not read). Where routing may choose
among several routes (R2.3, R3, R4.2), each choice is followed: some of the dialogs take
each."""

from __future__ import annotations

from typing import Any, NamedTuple

from pybroker.apps.diagnose.explained import Key, Option, decide_keys
from pybroker.apps.diagnose.network import Network, Node

_OUTSIDE = "outside"  # msdb's table routes what arrives from outside (R1.2)


class _Way(NamedTuple):
    """Where a group of dialogs has got to: at ``here``, routed from ``origin``, past the
    instances ``passed``."""

    dialog: int
    here: Node
    origin: str
    passed: frozenset[str]


def check(net: Network) -> None:
    dialogs = [(node, d) for node in net.nodes
               for d in node.target.rows("select_dialog_contracts")]
    reached = targets(net, dialogs)
    accepting: dict[str, dict[tuple[str, str], list[str]]] = {}
    for (node, dialog), found in zip(dialogs, reached, strict=True):
        for there, database in found:
            if there.name not in accepting:
                accepting[there.name] = _accepted(there)
            accepted = accepting[there.name].get((database, dialog["far_service"]), [])
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


def _accepted(node: Node) -> dict[tuple[str, str], list[str]]:
    """(database, service) -> the contracts it accepts as a target, in order."""
    out: dict[tuple[str, str], list[str]] = {}
    for r in node.target.rows("select_service_contracts"):
        out.setdefault((r["database_name"], r["service_name"]), []).append(
            r["service_contract_name"])
    return {k: sorted(v) for k, v in out.items()}


def targets(net: Network, dialogs: list[tuple[Node, dict[str, Any]]]
            ) -> list[list[tuple[Node, str]]]:
    """For each dialog (its instance and its row of select_dialog_contracts.sql), the
    instances named and databases where its far service is delivered, routed from its
    database and on through the forwarders named (R1-R4, R7): one hop of every dialog at a
    time, each instance asked all the keys of a hop in one query (the first: every dialog
    group of the instance)."""
    at = {node.name: node.target.routing_now() for node in net.nodes}
    decided: dict[str, dict[Key, list[Option]]] = {}
    found: list[list[tuple[Node, str]]] = [[] for _ in dialogs]
    ways = [_Way(i, node, d["database_name"], frozenset()) for i, (node, d) in enumerate(dialogs)]
    while ways:
        asked: dict[str, tuple[Node, set[tuple[str, str, str | None]]]] = {}
        for way in ways:
            _, d = dialogs[way.dialog]
            k = (way.origin, d["far_service"], d["far_broker_instance"])
            if (*k, at[way.here.name]) not in decided.setdefault(way.here.name, {}):
                asked.setdefault(way.here.name, (way.here, set()))[1].add(k)
        for name, (node, keys) in asked.items():
            decided[name].update(decide_keys(node.target, sorted(keys, key=_order), at[name]))
        onward: list[_Way] = []
        for way in ways:
            _, d = dialogs[way.dialog]
            service, broker = d["far_service"], d["far_broker_instance"]
            options = decided[way.here.name][(way.origin, service, broker, at[way.here.name])]
            for option in options:
                reached, there = _hop(net, way.here, option, service, broker)
                if reached is not None and all((n.name, db) != (reached[0].name, reached[1])
                                               for n, db in found[way.dialog]):
                    found[way.dialog].append(reached)
                passed = way.passed | {way.here.name}
                if there is not None and there.name not in passed:
                    onward.append(_Way(way.dialog, there, _OUTSIDE, passed))
        ways = list({(w.dialog, w.here.name, w.origin, w.passed): w for w in onward}.values())
    return found


def _hop(net: Network, here: Node, option: Option, service: str, broker: str | None
         ) -> tuple[tuple[Node, str] | None, Node | None]:
    """What one possible decision of ``here`` does with a dialog for ``service``: the
    instance and database it reaches, or the forwarder named it is sent on to."""
    if option.outcome == "deliver":
        return ((here, option.database) if option.database in here.hosts(service) else None,
                None)
    if option.outcome != "send":
        return None, None  # DELAYED or dropped: D-CFG-001, D-CNV-005 and the routing rules say so
    there = net.at(option.address)
    if there is None:
        return None, None
    if there.forwarding:
        return None, there
    hosting = [d for d in there.hosts(service)
               if broker is None or there.databases.get(d) == broker]
    return ((there, hosting[0]) if hosting else None), None


def _order(k: tuple[str, str, str | None]) -> tuple[str, str, str]:
    return k[0], k[1], k[2] or ""
