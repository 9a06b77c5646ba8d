"""Mirrored routes (R9): which address of a mirrored pair is the principal, sans-I/O.

A route with a MIRROR_ADDRESS names the two partners of a mirrored database. The engine
hands such a route's messages to the wire under the pair's key (``pair_key``) instead of an
address; the transport asks this core where they go. The first use of a pair asks both
addresses, with a PROBE frame (frames.py), whether the database of the conversation's
service (and broker identifier, when named) is principal there (R9.2); from the first
"PRINCIPAL" on, the pair's messages go to that address only, and it is not asked again
while it serves. When it cannot be reached or says it is no longer principal (a refusal
from a MIRROR database, or a probe's answer), the pair is asked again, and the messages go
to whichever partner then says it is principal (R9.3); until one does, nothing is sent to
either, and both are asked again and again with the retransmission back-off (R9.4, C5).

Like ``Transmitter``, this takes ``now`` and never touches a socket or a clock: the
transport sends the probes ``probes_due`` names, feeds answers and failures in, and re-arms
one timer at ``get_timer()``. What changed comes back as ``Change`` values (the transport
moves the pair's conversations and records a "Broker:Mirrored Route State Changed" event).

Choices where the seeds are silent: a question names the service and, when the
conversation has one, the broker identifier (the seed's example 3 routes a mirrored pair
with no broker identifier, R10.3), so each pair asks once per (service, broker identifier)
it carries; an unanswered probe counts as an unreachable partner after ``probe_timeout``;
if both partners claim to be principal, the first answer wins until it stops serving.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from pybroker.core.wire.addresses import next_hop
from pybroker.core.wire.dialog import backoff
from pybroker.errors import WireError

PAIR_PREFIX = "mirrored:"
PROBING = "PROBING"  # asking both partners which is principal (R9.2, R9.3)
PRINCIPAL_KNOWN = "PRINCIPAL"  # sending to the principal only (R9.2)
NO_PRINCIPAL = "NO PRINCIPAL"  # neither partner claims it: nothing sent, both asked again (R9.4)
DEFAULT_PROBE_TIMEOUT = 10.0  # seconds an unanswered probe is waited for
# SQL Server's error for a database that is a mirror ("The database cannot be opened. It
# is acting as a mirror database."): the code of a refusal from a MIRROR database, which
# tells the sender its principal has changed (R9.3)
NOT_PRINCIPAL_CODE = 954

# what a partner said (or did) when last asked
ASKED, UNREACHABLE = "ASKED", "UNREACHABLE"
PRINCIPAL, MIRROR = "PRINCIPAL", "MIRROR"


def pair_key(address: str, mirror_address: str) -> str:
    """The key under which a mirrored route's messages are handed to the wire: never a
    network address itself (``next_hop`` refuses it), so it cannot be dialled by mistake."""
    return f"{PAIR_PREFIX}{address} {mirror_address}"


def is_pair_key(key: str) -> bool:
    return key.startswith(PAIR_PREFIX)


def split_pair_key(key: str) -> tuple[str, str]:
    """(address, mirror address) of a pair key."""
    if not is_pair_key(key):
        raise WireError(f"{key!r} is not a mirrored route's key")
    address, _, mirror = key[len(PAIR_PREFIX):].partition(" ")
    return address, mirror


@dataclass(frozen=True, slots=True)
class ProbeOut:
    """A probe to send: the question for ``hop`` (a next-hop address)."""

    hop: str
    probe_id: str
    service: str
    broker_instance: str | None


@dataclass(frozen=True, slots=True)
class Change:
    """A pair's state changed: its conversations go to ``principal`` now (its next hop),
    or wait (``principal`` None)."""

    key: str
    state: str
    principal: str | None  # the route's address as written (address or mirror address)
    hop: str | None  # the principal's next hop
    why: str


@dataclass(slots=True)
class MirroredRoute:
    """One mirrored pair and what is known of it (a row of sys.dm_broker_mirrored_routes)."""

    key: str
    address: str
    mirror_address: str
    hops: tuple[str, str]  # next hops of address and mirror address
    service: str
    broker_instance: str | None
    since: float
    state: str = PROBING
    principal: int | None = None  # index into hops
    last_probe_time: float | None = None
    answers: dict[int, str] = field(default_factory=dict)  # partner -> last answer
    due: dict[int, float] = field(default_factory=dict)  # partner -> when to ask again
    failures: int = 0  # rounds in which no partner claimed to be principal (back-off)
    dialogs: set[tuple[str, bool]] = field(default_factory=set)
    prune_at: int = 4096  # dialogs remembered before those no longer in flight are dropped

    @property
    def principal_address(self) -> str | None:
        if self.principal is None:
            return None
        return (self.address, self.mirror_address)[self.principal]

    @property
    def principal_hop(self) -> str | None:
        return None if self.principal is None else self.hops[self.principal]


class MirroredRoutes:
    """Every mirrored pair this instance sends to."""

    def __init__(self, *, retry_scale: float = 1.0,
                 probe_timeout: float = DEFAULT_PROBE_TIMEOUT) -> None:
        self.retry_scale = retry_scale
        self.probe_timeout = probe_timeout
        self._routes: dict[str, MirroredRoute] = {}
        self._asked: dict[str, tuple[str, int, float]] = {}  # probe id -> (key, partner, by)

    # -- input ---------------------------------------------------------------------------

    def use(self, key: str, service: str, broker_instance: str | None,
            dialog: tuple[str, bool], now: float) -> MirroredRoute:
        """A conversation direction sends on the pair ``key``: the first use asks both
        partners (R9.2). Raises WireError for a key whose addresses are not tcp://host:port."""
        route = self._routes.get(key)
        if route is None:
            address, mirror = split_pair_key(key)
            route = self._routes[key] = MirroredRoute(
                key, address, mirror, (next_hop(address), next_hop(mirror)), service,
                broker_instance, now)
            route.due = {0: now, 1: now}
        route.dialogs.add(dialog)
        return route

    def forget_dialogs(self, key: str, keep: Iterable[tuple[str, bool]]) -> None:
        """Only ``keep`` of the pair's conversation directions are still in flight."""
        route = self._routes.get(key)
        if route is not None:
            route.dialogs &= set(keep)

    def on_answer(self, probe_id: str, role: str, now: float) -> list[Change]:
        """A partner answered a probe (an answer to no outstanding probe is ignored)."""
        asked = self._asked.pop(probe_id, None)
        if asked is None:
            return []
        key, partner, _ = asked
        route = self._routes.get(key)
        if route is None:
            return []
        if role == PRINCIPAL:
            return self._claimed(route, partner, now)
        return self._not_principal(route, partner, role or "NONE", now,
                                   f"{route.hops[partner]} says it is not principal "
                                   f"({(role or 'no such database').lower()})")

    def on_unreachable(self, hop: str, now: float, why: str) -> list[Change]:
        """``hop`` could not be reached: the pairs it is a partner of hear it."""
        changes: list[Change] = []
        for route in self._routes.values():
            for partner, h in enumerate(route.hops):
                if h == hop:
                    self._drop_asked(route, partner)
                    changes += self._not_principal(route, partner, UNREACHABLE, now,
                                                   f"{hop} cannot be reached: {why}")
        return changes

    def on_not_principal(self, hop: str, now: float, why: str) -> list[Change]:
        """``hop`` refused a message because its database is not principal (R9.3)."""
        changes: list[Change] = []
        for route in self._routes.values():
            if route.principal_hop == hop:
                changes += self._not_principal(route, route.principal, MIRROR, now,
                                               f"{hop} refused a message: {why}")
        return changes

    def handle_timer(self, now: float) -> list[Change]:
        """Probes unanswered for ``probe_timeout`` count as unreachable partners."""
        changes: list[Change] = []
        for probe_id, (key, partner, by) in list(self._asked.items()):
            if now >= by:
                del self._asked[probe_id]
                route = self._routes.get(key)
                if route is not None:
                    changes += self._not_principal(
                        route, partner, UNREACHABLE, now,
                        f"{route.hops[partner]} did not answer within {self.probe_timeout:g} s")
        return changes

    # -- output --------------------------------------------------------------------------

    def probes_due(self, now: float) -> list[ProbeOut]:
        """The probes to send now (each is then outstanding until answered or timed out)."""
        out: list[ProbeOut] = []
        for route in self._routes.values():
            if route.state == PRINCIPAL_KNOWN:
                continue  # R9.2: the principal serves; nobody is asked
            for partner, when in list(route.due.items()):
                if when <= now:
                    del route.due[partner]
                    probe_id = str(uuid.uuid4())
                    self._asked[probe_id] = (route.key, partner, now + self.probe_timeout)
                    route.answers[partner] = ASKED
                    route.last_probe_time = now
                    out.append(ProbeOut(route.hops[partner], probe_id, route.service,
                                        route.broker_instance))
        return out

    def get_timer(self) -> float | None:
        """The earliest of: a probe to send, an outstanding probe's time-out."""
        times = [by for _, _, by in self._asked.values()]
        for route in self._routes.values():
            if route.state != PRINCIPAL_KNOWN:
                times += route.due.values()
        return min(times) if times else None

    def route(self, key: str) -> MirroredRoute | None:
        return self._routes.get(key)

    def routes(self) -> list[MirroredRoute]:
        return list(self._routes.values())

    # -- transitions -----------------------------------------------------------------------

    def _claimed(self, route: MirroredRoute, partner: int, now: float) -> list[Change]:
        route.answers[partner] = PRINCIPAL
        if route.state == PRINCIPAL_KNOWN:
            return []  # the first claim serves until it stops (the other's is ignored)
        route.state = PRINCIPAL_KNOWN
        route.principal = partner
        route.since = now
        route.failures = 0
        route.due.clear()  # the partner's outstanding probe is still answered (for the view)
        return [Change(route.key, route.state, route.principal_address, route.principal_hop,
                       f"{route.principal_hop} says it is principal")]

    def _not_principal(self, route: MirroredRoute, partner: int, answer: str, now: float,
                       why: str) -> list[Change]:
        route.answers[partner] = answer
        changes: list[Change] = []
        if route.state == PRINCIPAL_KNOWN:
            if route.principal != partner:
                return []  # the partner's news matters only once the principal stops serving
            # R9.3: the principal is gone; both are asked now, and the partner that says
            # it is principal gets the messages
            route.state = PROBING
            route.principal = None
            route.since = now
            route.due = {0: now, 1: now}
            for other in (0, 1):  # answers to earlier questions are stale now
                self._drop_asked(route, other)
            return [Change(route.key, route.state, None, None, why)]
        if partner in route.due or any(k == route.key and p == partner
                                       for k, p, _ in self._asked.values()):
            return []  # asked again already
        others = [a for p, a in route.answers.items() if p != partner]
        if route.state == PROBING and others and others[0] not in (ASKED, PRINCIPAL):
            # R9.4: neither partner claims to be principal: nothing is sent, both are
            # asked again after the back-off
            route.state = NO_PRINCIPAL
            route.since = now
            changes.append(Change(route.key, route.state, None, None, why))
        if route.state == NO_PRINCIPAL:
            route.failures += 1
        route.due[partner] = now + backoff(route.failures, self.retry_scale)
        return changes

    def _drop_asked(self, route: MirroredRoute, partner: int) -> None:
        for probe_id in [p for p, (k, i, _) in self._asked.items()
                         if k == route.key and i == partner]:
            del self._asked[probe_id]
