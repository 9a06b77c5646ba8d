"""The routing engine's memory: the possible decisions of each conversation key, and which
catalog changes can alter which of them.

A decision for a key (origin, service_name, broker_instance) reads only (SPEC R1-R4):
- the routing table of the key's routing database (the origin's own, msdb's for a message
  from outside, R1.1/R1.2): its routes that name the service (R2.1-R2.3), its routes to the
  dynamic routing service (R2.4) and its wildcard routes (R2.5);
- the route requests of that database for the service (R2.4);
- the services of that name anywhere in the instance (R2.6, R3.2, R4);
- the databases (names, identifiers: R1, R4.1, R4.2);
- the forwarding setting, for a message from outside only (R3.6);
- the clock, through route expiry (R1.4; handled by the engine's validity horizon).

So a write needs to void only the answers it can change (:class:`CatalogChange`), and a
service name that no route, service or route request mentions decides like any other such
name: its answer is kept once per origin (a *class* answer), decided by the same SQL.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import accumulate

from pybroker.core.routing.decision import RouteDecision

OUTSIDE = "outside"
DYNAMIC_ROUTING_SERVICE = "SQL/ServiceBroker/BrokerConfiguration"  # R8.1

# R10.6: a service name that begins with tcp://host:port can use a TRANSPORT route, and its
# decision then carries that address: such a name never shares a class answer. The same
# pattern as the REGEXP_EXTRACT of sql/routing/_route_steps.sql.
TRANSPORT_PREFIX = re.compile(r"^[tT][cC][pP]://[^/:]+:[0-9]+")

Key = tuple[str, str, str | None]


def routing_database(origin: str) -> str:
    """The database whose routing table decides for ``origin`` (R1.1, R1.2)."""
    return "msdb" if origin == OUTSIDE else origin


@dataclass(frozen=True, slots=True)
class CatalogChange:
    """What one write changed, in terms of the inputs listed above.

    ``routes_of`` and ``route_services``: routes (or route requests) of that database were
    created, altered or dropped, naming these services (before and after the change);
    None among them stands for a wildcard route, and the dynamic routing service's name
    counts as one too, since both decide for every service (R2.4, R2.5).
    ``services``: services of these names were created or dropped somewhere.
    ``forwarding``: the forwarding setting changed (R3.6).
    ``everything``: databases changed, or a write that says nothing more precise.
    """

    routes_of: str | None = None
    route_services: frozenset[str | None] = field(default_factory=frozenset)
    services: frozenset[str] = field(default_factory=frozenset)
    forwarding: bool = False
    everything: bool = False

    @property
    def touches_every_service(self) -> bool:
        return None in self.route_services or DYNAMIC_ROUTING_SERVICE in self.route_services

    @property
    def named_services(self) -> frozenset[str]:
        """Service names this change makes known to the catalog (never unknown again)."""
        return self.services | {s for s in self.route_services if s is not None}

    def affects(self, key: Key) -> bool:
        origin, service_name, _ = key
        if self.everything:
            return True
        if service_name in self.services:
            return True
        if self.forwarding and origin == OUTSIDE:
            return True
        if self.routes_of is not None and routing_database(origin) == self.routes_of:
            return self.touches_every_service or service_name in self.route_services
        return False

    def affects_unknown_services(self, origin: str) -> bool:
        """Whether the class answer of ``origin`` (service names the catalog does not know)
        can change: only through the inputs shared by every service."""
        if self.everything or (self.forwarding and origin == OUTSIDE):
            return True
        return self.routes_of == routing_database(origin) and self.touches_every_service


NOTHING = CatalogChange()
EVERYTHING = CatalogChange(everything=True)


class Plan:
    """The possible decisions of one key and the cumulative weights to draw among them."""

    __slots__ = ("cumulative", "decisions", "only")

    def __init__(self, decisions: Sequence[RouteDecision], weights: Sequence[float]) -> None:
        self.decisions = tuple(decisions)
        self.cumulative = tuple(accumulate(weights))
        self.only = self.decisions[0] if len(self.decisions) == 1 else None

    def draw(self, rng: Callable[[], float]) -> RouteDecision:
        if self.only is not None:
            return self.only
        index = bisect_right(self.cumulative, rng() * self.cumulative[-1])
        return self.decisions[min(index, len(self.decisions) - 1)]


def is_class_member(key: Key, known_services: set[str] | frozenset[str]) -> bool:
    """Whether ``key`` decides exactly like every other key of its origin whose service name
    the catalog does not know: no broker identifier named (R2.1, R2.6 and R4.1 read it), no
    route, service or route request of that name, no TRANSPORT address in it (R10.6)."""
    _, service_name, broker_instance = key
    return (
        broker_instance is None
        and service_name not in known_services
        and TRANSPORT_PREFIX.match(service_name) is None
    )
