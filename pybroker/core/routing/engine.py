"""Routing orchestration: runs the SQL of sql/routing/ set-based and answers from memory.

One query decides every requested (origin, service, broker identifier) key at once and
returns all possible decisions of each key with their probability. Those answers stay
true until the catalog changes in a way that can alter them or the earliest live route
expires, so a warm ``route()`` is a dict lookup plus, where the seeds ask for an arbitrary
pick (R2.3, R3, R4.2), one random draw per call.

A write tells the engine what it changed (:class:`~pybroker.core.routing.cache.CatalogChange`):
only the answers that change can alter are voided, and once the write has committed the
keys it voided are decided again in one query, so the next ``route()`` of a key that was
in use stays warm. A service name the catalog does not know is answered from its origin's
class answer (see pybroker/core/routing/cache.py). A key never decided whose service the catalog
knows takes the point path (pybroker/core/routing/point.py) on the rows the catalog mirror holds
in memory (pybroker/core/routing/mirror.py): no SQL at all, unless a part it reads was changed
inside a transaction still open, or a batch of many keys is asked at once; then the SQL
runs. The query is not a prepared statement on purpose: DuckDB bakes table statistics into
a prepared plan (an all-NULL routes column becomes an empty result), so a prepared plan
goes wrong when rows change.
"""

from __future__ import annotations

import contextlib
import math
import random
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from pybroker.core.routing.cache import (
    EVERYTHING,
    NOTHING,
    OUTSIDE,
    CatalogChange,
    Key,
    Plan,
    is_class_member,
)
from pybroker.core.routing.decision import RouteDecision, TraceStep, build_trace
from pybroker.core.routing.definition import MAX_VALUE_LENGTH, check_name, normalize_guid
from pybroker.core.routing.mirror import CatalogMirror
from pybroker.core.routing.point import route_option_rows
from pybroker.errors import BrokerError, NotFoundError
from pybroker.storage.store import Store
from pybroker.timestamps import to_utc_datetime

# After a write, at most this many voided keys are decided again at once (one query); a
# change that voids more (a wildcard route in a busy database) leaves them to be decided
# on their next use.
REDECIDE_LIMIT = 256
# Up to this many keys not yet known are decided one by one on the point path (one small
# bound query each, ~1 ms, and Python: pybroker/core/routing/point.py); more go through the
# set-based routing query in one run (~18 ms, then far under 1 ms per key).
POINT_PATH_LIMIT = 8
# With the catalog mirror fresh, the point path runs no query (~0.03-0.2 ms a key): up to this
# many keys are decided that way.
MIRROR_POINT_PATH_LIMIT = REDECIDE_LIMIT


@dataclass(frozen=True, slots=True)
class ExplainStep:
    """One row of the routing process traced (see sql/routing/explain_route.sql)."""

    step: str
    description: str
    candidates: tuple[str, ...]
    result: str


class RoutingEngine:
    def __init__(
        self,
        store: Store,
        clock: Callable[[], float],
        rng: Callable[[], float] = random.random,
    ) -> None:
        self._store = store
        self._clock = clock
        self._rng = rng
        # the answers kept, by routing key (read by the tests of the cache; written here)
        self.plans: dict[Key, Plan] = {}
        # origin -> the answer for every service name the catalog does not know
        self.class_plans: dict[str, Plan] = {}
        self._known_services: set[str] | None = None
        self._database_names: frozenset[str] | None = None
        # R1.4: answers computed before the earliest expiry after them stay true until it.
        # valid_until gates the warm path; a route change closes it until the horizon is
        # computed again (without voiding answers the change cannot alter).
        self._expiry_horizon = -math.inf
        self.valid_until = -math.inf
        # Bumped by every change: an answer computed across a change is not kept.
        self._epoch = 0
        self._lock = threading.Lock()
        self._voided: set[Key] = set()
        # A change inside an open transaction that then rolls back leaves answers decided on
        # rows that never were: they are all voided then (rollbacks without one void none).
        self._changed_in_transaction = False
        # The inputs of every decision, in memory; loaded now, so that the first decision
        # after opening runs no SQL either (pybroker/core/routing/mirror.py says why and costs).
        self.mirror = CatalogMirror()
        store.on_transaction_end(self._transaction_ended)
        self._refresh_mirror()

    def invalidate(self) -> None:
        """Every cached answer is void, and the catalog mirror is read again (databases
        changed, or rows were written without a CatalogChange)."""
        self.changed(EVERYTHING)

    def changed(self, change: CatalogChange) -> None:
        """A write changed the catalog: void the answers ``change`` can alter, and read the
        parts of the catalog mirror it names again (now, unless a transaction is open:
        then when it ends)."""
        if change == NOTHING:
            return
        in_transaction = self._store.in_transaction
        if in_transaction:
            self._changed_in_transaction = True
        self.mirror.mark(change)
        self._void(change)
        if not in_transaction:
            self._refresh_mirror()

    def _void(self, change: CatalogChange) -> None:
        with self._lock:
            self._epoch += 1
            if change.everything:
                self.plans.clear()
                self.class_plans.clear()
                self._voided.clear()
                self._known_services = None
                self._database_names = None
                self._expiry_horizon = self.valid_until = -math.inf
                return
            voided = [key for key in self.plans if change.affects(key)]
            for key in voided:
                del self.plans[key]
            self._voided.update(voided)
            for origin in [o for o in self.class_plans if change.affects_unknown_services(o)]:
                del self.class_plans[origin]
            if self._known_services is not None:
                self._known_services |= change.named_services
            if change.routes_of is not None:
                self.valid_until = -math.inf  # a lifetime may have changed: recompute

    def _transaction_ended(self, committed: bool) -> None:
        changed, self._changed_in_transaction = self._changed_in_transaction, False
        if changed and not committed:
            # Answers decided inside may rest on rows that never were. The mirror never
            # holds uncommitted rows: it reads again only the parts marked inside.
            self._void(EVERYTHING)
        if self.mirror.pending or self._known_services is None:
            self._refresh_mirror()

    def _refresh_mirror(self) -> None:
        """Read the stale parts of the catalog mirror again; on failure they stay stale (and
        decisions that read them run select_key_inputs.sql). It runs where a write ends,
        a rollback's included: nothing it meets may escape into the write's own error."""
        with contextlib.suppress(BrokerError, RuntimeError, ValueError, TypeError):
            self.mirror.refresh(self._store)
        if self._known_services is None or self._database_names is None:
            self._adopt_from_mirror()  # copying 100,000 names takes ms: the write pays

    def _adopt_from_mirror(self) -> None:
        """The service names and database names an ``everything`` change forgot, from the
        mirror once it is loaded again (unless a change came meanwhile)."""
        epoch = self._epoch
        known = self.mirror.known_services() if self._known_services is None else None
        names = self.mirror.database_names() if self._database_names is None else None
        with self._lock:
            if self._epoch != epoch:
                return
            if known is not None and self._known_services is None:
                self._known_services = known
            if names is not None and self._database_names is None:
                self._database_names = names

    def redecide(self) -> None:
        """After a write committed: decide again the keys it voided that were in use, so
        their next ``route()`` is warm (at most REDECIDE_LIMIT of them; on the mirror, or
        in one query)."""
        if self.mirror.pending:
            self._refresh_mirror()
        with self._lock:
            keys = sorted(self._voided, key=_sort_key)
            self._voided.clear()
        if not keys or len(keys) > REDECIDE_LIMIT:
            return
        # a database that went away: its keys are decided on next use, if ever
        with contextlib.suppress(NotFoundError):
            self.route_many(keys)

    # -- deciding ------------------------------------------------------------------------

    def route(self, origin: str, service_name: str, broker_instance: str | None) -> RouteDecision:
        now = self._clock()
        if now < self.valid_until:
            plan = self.plans.get((origin, service_name, broker_instance))
            if plan is not None:
                return plan.draw(self._rng)
        return self.route_many([(origin, service_name, broker_instance)], now=now)[0]

    def route_many(
        self, keys: Iterable[tuple[str, str, str | None]], *, now: float | None = None
    ) -> list[RouteDecision]:
        """Decide for many conversations; the keys not yet known are resolved in one query."""
        if now is None:
            now = self._clock()
        self._keep_horizon(now)
        requested = list(keys)
        normalized = [self.normalize_key(key) for key in requested]
        epoch = self._epoch
        found: dict[Key, Plan] = {}
        missing: list[Key] = []
        for key in set(normalized):
            plan = self.plans.get(key)
            if plan is None and is_class_member(key, self._known()):
                plan = self.class_plans.get(key[0])
            if plan is None:
                missing.append(key)
            else:
                found[key] = plan
        if missing:
            found.update(self._load(sorted(missing, key=_sort_key), now))
        with self._lock:
            if self._epoch == epoch:  # nothing changed meanwhile: keep the answers
                for raw, key in zip(requested, normalized, strict=True):
                    self.plans[raw] = found[key]
        return [found[key].draw(self._rng) for key in normalized]

    def explain(self, origin: str, service_name: str, broker_instance: str | None):
        origin, service_name, broker_instance = self.normalize_key(
            (origin, service_name, broker_instance)
        )
        _, rows = self._store.query(
            "routing/explain_bound_key.sql",
            {
                "origin": origin,
                "service_name": service_name,
                "broker_instance": broker_instance,
                "routed_at": to_utc_datetime(self._clock()),
            },
        )
        # columns: origin, service_name, broker_instance, routed_at, step_order, step,
        # description, candidates, result
        return [ExplainStep(r[5], r[6], tuple(r[7]), r[8]) for r in rows]

    # -- internals -----------------------------------------------------------------------

    def _keep_horizon(self, now: float) -> None:
        """R1.4: past the earliest expiry every answer may be wrong; and after a route
        change the horizon itself is computed again."""
        if now < self.valid_until:
            return
        known, expiry = self.mirror.next_expiry(to_utc_datetime(now))
        if not known:
            row = self._store.fetchone(
                _sql("routing/next_route_expiry.sql"), {"now": to_utc_datetime(now)}
            )
            expiry = row[0] if row and row[0] is not None else None
        horizon = math.inf if expiry is None else expiry.replace(tzinfo=UTC).timestamp()
        with self._lock:
            if now >= self._expiry_horizon:  # a route expired since the answers were made
                self._epoch += 1
                self.plans.clear()
                self.class_plans.clear()
            self._expiry_horizon = self.valid_until = horizon

    def _known(self) -> set[str]:
        """Every service name the catalog mentions (routes, services, route requests)."""
        known = self._known_services
        if known is None:  # the mirror's were adopted after its load, unless it failed
            epoch = self._epoch
            rows = self._store.fetchall(_sql("instance/select_known_service_names.sql"))
            known = {r[0] for r in rows}
            with self._lock:
                if self._epoch == epoch:  # a change meanwhile may name a service it lacks
                    self._known_services = known
        return known

    def _databases(self) -> frozenset[str]:
        names = self._database_names
        if names is None:
            epoch = self._epoch
            rows = self._store.fetchall(_sql("instance/select_database_names.sql"))
            names = frozenset(r[0] for r in rows)
            with self._lock:
                if self._epoch == epoch:
                    self._database_names = names
        return names

    def normalize_key(self, key: tuple[str, str, str | None]) -> Key:
        """``key`` as the answers are kept: the origin checked, the names and the broker
        instance in their canonical spelling."""
        origin, service_name, broker_instance = key
        if origin != OUTSIDE and (not isinstance(origin, str) or origin not in self._databases()):
            raise NotFoundError(
                f"origin {origin!r} is neither a database of this instance nor 'outside'"
            )
        service_name = check_name("service", service_name, MAX_VALUE_LENGTH)
        if broker_instance is not None:
            broker_instance = normalize_guid(broker_instance)
        return origin, service_name, broker_instance

    def resolve_by_query(self, keys: Sequence[Key], now: float) -> list[tuple]:
        """resolve_route_options.sql for ``keys``, given as bound lists."""
        _, rows = self._store.query(
            "routing/resolve_bound_keys.sql",
            {
                "origin": [k[0] for k in keys],
                "service_name": [k[1] for k in keys],
                "broker_instance": [k[2] for k in keys],
                "routed_at": to_utc_datetime(now),
            },
        )
        return rows

    def _load(self, keys: Sequence[Key], now: float) -> dict[Key, Plan]:
        """Decide ``keys`` and keep the answers, unless the catalog changed meanwhile."""
        epoch = self._epoch
        known = self._known()
        plans = self.decide_plans(keys, now)
        with self._lock:
            if self._epoch == epoch:
                self.plans.update(plans)
                for key, plan in plans.items():
                    if is_class_member(key, known):
                        self.class_plans.setdefault(key[0], plan)
        return plans

    def resolve_by_point(self, keys: Sequence[Key], now: float) -> list[tuple]:
        """The rows of resolve_route_options.sql for ``keys``, on the point path: what each
        decision reads, from the catalog mirror (or, while a part of it is stale, one bound
        query per key), and the steps in Python."""
        routed_at = to_utc_datetime(now)
        rows: list[tuple] = []
        for key in keys:
            inputs = self.mirror.key_inputs(key[0], key[1], routed_at)
            if inputs is None:
                inputs = self.key_inputs_by_query(key, routed_at)
            rows.extend(route_option_rows(key, routed_at, inputs))
        return rows

    def key_inputs_by_query(self, key: Key, routed_at: datetime) -> list[tuple]:
        """select_key_inputs.sql: what the mirror holds, as the connection sees it now."""
        return self._store.fetchall(
            _sql("routing/select_key_inputs.sql"),
            {"origin": key[0], "service_name": key[1], "routed_at": routed_at},
        )

    def decide_plans(
        self, keys: Sequence[Key], now: float, *, point: bool | None = None
    ) -> dict[Key, Plan]:
        """The possible decisions of ``keys``: on the point path for a few keys, else one
        run of the routing query (``point`` forces one or the other)."""
        if point is None:
            point = len(keys) <= POINT_PATH_LIMIT or (
                len(keys) <= MIRROR_POINT_PATH_LIMIT and self.mirror.fresh)
        rows = self.resolve_by_point(keys, now) if point else self.resolve_by_query(keys, now)
        grouped: dict[Key, tuple[list[RouteDecision], list[float]]] = {}
        for row in rows:
            (origin, service, broker, _routed_at, _group, outcome, route, address, mirror,
             database, decision_broker, match_step, choose_step, locate_step, decided_by,
             weight) = row
            trace: tuple[TraceStep, ...] = build_trace(
                names_broker=broker is not None,
                match_step=match_step,
                choose_step=choose_step,
                locate_step=locate_step,
                decided_by=decided_by,
                outcome=outcome,
            )
            decision = RouteDecision(
                outcome, route, address, mirror, database, decision_broker,
                match_step, choose_step, locate_step, decided_by, trace,
            )
            decisions, weights = grouped.setdefault((origin, service, broker), ([], []))
            decisions.append(decision)
            weights.append(float(weight))
        plans: dict[Key, Plan] = {}
        for key in keys:
            if key not in grouped:
                raise NotFoundError(f"routing found no answer for {key!r}")  # pragma: no cover
            plans[key] = Plan(*grouped[key])
        return plans


def _sort_key(key: Key) -> tuple[str, str, str]:
    return key[0], key[1], key[2] or ""


def _sql(name: str) -> str:
    from pybroker.storage.templates import render

    return render(name)


__all__ = ["OUTSIDE", "ExplainStep", "RoutingEngine"]
