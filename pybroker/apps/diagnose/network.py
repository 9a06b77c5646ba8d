"""The network diagnose looks at: every instance named, what it hosts and where it listens,
read once from each (sql/diagnose/), with the addresses routes name mapped to instances.
"""

from __future__ import annotations

import datetime as dt
import functools
from dataclasses import dataclass, field
from typing import Any

from pybroker.apps.diagnose.findings import Finding
from pybroker.apps.diagnose.rules import RULES_BY_CODE
from pybroker.apps.diagnose.targets import Target

# LISTENER_IP = ALL: pybroker listens on 127.0.0.1 (sql/catalog/38_sys_tcp_endpoints.sql)
_ALL_ADDRESSES = "127.0.0.1"
_SAME_HOST = {"localhost": "127.0.0.1", "[::1]": "::1"}


@functools.lru_cache(maxsize=4096)  # asked of every route's address, often the same few
def normal_address(address: str | None) -> str | None:
    """A ``tcp://host:port`` address in one spelling (scheme in lower case, no trailing
    ``/``, localhost as 127.0.0.1), or None for LOCAL, TRANSPORT and None."""
    if address is None:
        return None
    text = address.strip().rstrip("/")
    if not text.lower().startswith("tcp://"):
        return None
    host, _, port = text[6:].rpartition(":")
    host = _SAME_HOST.get(host.lower(), host.lower())
    return f"tcp://{host}:{port}"


@dataclass(slots=True)
class Node:
    """One instance named, as read: its databases (name -> broker identifier), routes,
    services, queues, broker endpoints, settings and trusted certificates."""

    target: Target
    databases: dict[str, str]
    routes: list[dict[str, Any]]
    services: list[dict[str, Any]]
    queues: list[dict[str, Any]]
    endpoints: list[dict[str, Any]]
    forwarding: bool
    certificate: str | None
    trusted: list[dict[str, Any]]
    addresses: set[str] = field(default_factory=set)
    # (database, schema, procedure) of each stored procedure, in lower case (T-SQL names
    # ignore case)
    procedures: set[tuple[str, str, str]] = field(default_factory=set)

    @property
    def name(self) -> str:
        return self.target.name

    def hosts(self, service: str) -> list[str]:
        """The databases of this instance that have ``service``."""
        return [s["database_name"] for s in self.services if s["name"] == service]

    def live_routes(self, database: str) -> list[dict[str, Any]]:
        """The routes of ``database`` that routing reads (not expired, R1.4)."""
        return [r for r in self.routes if r["database_name"] == database and not r["is_expired"]]


def read_node(target: Target) -> Node:
    settings = target.rows("select_instance_settings")[0]
    node = Node(
        target=target,
        databases={r["name"]: r["broker_instance"] for r in target.rows("select_databases")},
        routes=target.rows("select_routes"),
        services=target.rows("select_services"),
        queues=target.rows("select_queues"),
        endpoints=target.rows("select_broker_endpoints"),
        forwarding=bool(settings["is_forwarding_enabled"]),
        certificate=settings["endpoint_certificate"],
        trusted=target.rows("select_certificates"),
        procedures={(r["database_name"].lower(), r["schema_name"].lower(), r["name"].lower())
                    for r in target.rows("select_procedures")},
    )
    for e in node.endpoints:
        if e["port"]:  # 0: a dynamic port, not in the file
            address = normal_address(f"tcp://{e['ip_address'] or _ALL_ADDRESSES}:{e['port']}")
            if address is not None:
                node.addresses.add(address)
    return node


@dataclass(slots=True)
class Network:
    """The instances named, with ``now`` (UTC, naive as the catalog's timestamps), the
    thresholds of the hygiene rules (``leak_age``, ``leak_count``, ``idle_age``) and the
    earlier readings growth is measured from."""

    nodes: list[Node]
    now: dt.datetime
    leak_age: dt.timedelta
    leak_count: int
    # no traffic for longer than this: an idle endpoint (D-CNV-006)
    idle_age: dt.timedelta = dt.timedelta(days=1)
    findings: list[Finding] = field(default_factory=list)
    # node name -> an earlier reading of the same instance and when it was taken (--since)
    earlier: dict[str, tuple[Target, dt.datetime]] = field(default_factory=dict)

    def at(self, address: str | None) -> Node | None:
        """The instance named that listens on ``address``, if any."""
        wanted = normal_address(address)
        if wanted is None:
            return None
        return next((n for n in self.nodes if wanted in n.addresses), None)

    def hosting(self, service: str) -> list[Node]:
        return [n for n in self.nodes if n.hosts(service)]

    def add(self, code: str, node: Node, database: str | None, objects: list[str],
            **fields: Any) -> None:
        """Record a finding of rule ``code`` for ``node`` (and ``database``)."""
        rule = RULES_BY_CODE[code]
        values = {"instance": node.name, "database": database, **fields}
        self.findings.append(Finding(
            code=rule.code, severity=rule.severity, title=rule.title, instance=node.name,
            database=database, objects=tuple(objects),
            happens=rule.happens.format(**values), fix=rule.fix.format(**values)))
