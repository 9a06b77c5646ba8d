"""Routing orchestration: runs the SQL of sql/routing/ set-based and answers from memory.

One query decides every requested (origin, service, broker identifier) key at once and
returns all possible decisions of each key with their probability. Those answers stay
true until the catalog changes or the earliest live route expires, so a warm ``route()``
is a dict lookup plus, where the seeds ask for an arbitrary pick (R2.3, R3, R4.2), one
random draw per call.

Every write through pybroker calls ``invalidate``; the next ``route()`` of each key then
runs one query (the cold path, bounded by DuckDB's planning and per-operator latency). The
query is not a prepared statement on purpose: DuckDB bakes table statistics into a
prepared plan (an all-NULL routes column becomes an empty result), so a prepared plan goes
wrong when rows change.
"""

from __future__ import annotations

import math
import random
from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import accumulate

from pybroker.errors import NotFoundError
from pybroker.routing.decision import RouteDecision, TraceStep, build_trace
from pybroker.routing.definition import MAX_VALUE_LENGTH, check_name, normalize_guid
from pybroker.storage import Store

OUTSIDE = "outside"

Key = tuple[str, str, str | None]


def to_utc_datetime(epoch_seconds: float) -> datetime:
    return datetime.fromtimestamp(epoch_seconds, UTC).replace(tzinfo=None)


@dataclass(frozen=True, slots=True)
class ExplainStep:
    """One row of the routing process traced (see sql/routing/explain_route.sql)."""

    step: str
    description: str
    candidates: tuple[str, ...]
    result: str


class _Plan:
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
        self._plans: dict[Key, _Plan] = {}
        self._valid_until = -math.inf
        self._database_names: frozenset[str] | None = None

    def invalidate(self) -> None:
        """The catalog changed: every cached answer is void."""
        self._plans.clear()
        self._valid_until = -math.inf
        self._database_names = None

    # -- deciding ------------------------------------------------------------------------

    def route(self, origin: str, service_name: str, broker_instance: str | None) -> RouteDecision:
        now = self._clock()
        if now < self._valid_until:
            plan = self._plans.get((origin, service_name, broker_instance))
            if plan is not None:
                return plan.draw(self._rng)
        return self.route_many([(origin, service_name, broker_instance)], now=now)[0]

    def route_many(
        self, keys: Iterable[tuple[str, str, str | None]], *, now: float | None = None
    ) -> list[RouteDecision]:
        """Decide for many conversations; the keys not yet known are resolved in one query."""
        if now is None:
            now = self._clock()
        if now >= self._valid_until:
            self._refresh(now)
        requested = list(keys)
        normalized = [self._normalize_key(key) for key in requested]
        missing = sorted({k for k in normalized if k not in self._plans}, key=_sort_key)
        if missing:
            self._load(missing, now)
        for raw, key in zip(requested, normalized, strict=True):
            if raw != key:
                self._plans[raw] = self._plans[key]
        return [self._plans[key].draw(self._rng) for key in normalized]

    def explain(self, origin: str, service_name: str, broker_instance: str | None):
        origin, service_name, broker_instance = self._normalize_key(
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

    def _refresh(self, now: float) -> None:
        self._plans.clear()
        row = self._store.fetchone(
            _sql("routing/next_route_expiry.sql"), {"now": to_utc_datetime(now)}
        )
        expiry = row[0] if row else None
        self._valid_until = (
            math.inf if expiry is None else expiry.replace(tzinfo=UTC).timestamp()
        )

    def _databases(self) -> frozenset[str]:
        if self._database_names is None:
            rows = self._store.fetchall(_sql("instance/select_database_names.sql"))
            self._database_names = frozenset(r[0] for r in rows)
        return self._database_names

    def _normalize_key(self, key: tuple[str, str, str | None]) -> Key:
        origin, service_name, broker_instance = key
        if origin != OUTSIDE and (not isinstance(origin, str) or origin not in self._databases()):
            raise NotFoundError(
                f"origin {origin!r} is neither a database of this instance nor 'outside'"
            )
        service_name = check_name("service", service_name, MAX_VALUE_LENGTH)
        if broker_instance is not None:
            broker_instance = normalize_guid(broker_instance)
        return origin, service_name, broker_instance

    def _resolve(self, keys: Sequence[Key], now: float) -> list[tuple]:
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

    def _load(self, keys: Sequence[Key], now: float) -> None:
        rows = self._resolve(keys, now)
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
        for key in keys:
            if key not in grouped:
                raise NotFoundError(f"routing found no answer for {key!r}")  # pragma: no cover
            self._plans[key] = _Plan(*grouped[key])


def _sort_key(key: Key) -> tuple[str, str, str]:
    return key[0], key[1], key[2] or ""


def _sql(name: str) -> str:
    from pybroker.sql_templates import render

    return render(name)


__all__ = ["OUTSIDE", "ExplainStep", "RoutingEngine"]
