"""Routing explained for many conversation keys in one query (sql/diagnose/explain_keys.sql,
which includes sql/routing/explain_route.sql): what ``Instance.explain`` answers for one key,
asked for every route or every group of conversations of an instance at once; and where
they go, every possible decision of many keys in one query (sql/diagnose/decide_keys.sql,
which includes sql/routing/resolve_route_options.sql: what ``Instance.route`` draws from).
The routing rules of diagnose ask their questions through here, so that reading an instance
of 10,000 routes is a few queries, not one per route.

A key is (origin, service name, broker identifier or None, the instant expiry is judged
at), spelt as the catalog keeps it (broker identifiers in lower case, as every way in
writes them).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any, NamedTuple

from pybroker.apps.diagnose.targets import Target
from pybroker.core.routing.engine import OUTSIDE

Key = tuple[str, str, str | None, dt.datetime]

# An R2 step's results that found no candidates.
NOTHING = ("no route", "not applicable", "not reached")

# The service name a wildcard route is asked about: one no route or service names (it holds
# a character a service name may, and "any" in words).
PROBE_SERVICE = "pybroker/diagnose/any-other-service"


class Step(NamedTuple):
    """One step of the routing process traced for a key (explain_route.sql's row): its code
    (R2.1 ... R3.6), the candidate routes it saw and what it did. A key's steps are those
    that saw candidates or decided without any (explain_keys.sql)."""

    step: str
    candidates: tuple[str, ...]
    result: str


def origin_of(database: str) -> str:
    """The origin a database's routing table is asked with: msdb routes what comes in
    (R1.2)."""
    return OUTSIDE if database == "msdb" else database


def key(database: str, service: str, broker: str | None, at: dt.datetime) -> Key:
    """The key a conversation of ``database`` with ``service`` (and ``broker``) is routed
    by at ``at``."""
    return (origin_of(database), service, broker, at)


def route_key(route: dict[str, Any], at: dt.datetime) -> Key:
    """The key a route (a row of select_routes.sql) is asked about: its service, or
    PROBE_SERVICE for a wildcard, and its broker identifier, from its own database."""
    return key(route["database_name"], route["remote_service_name"] or PROBE_SERVICE,
               route["broker_instance"], at)


def _grouped(target: Target, keys: str, wildcards: str = "every key",
             **params: Any) -> dict[Key, list[Step]]:
    steps: dict[Key, list[Step]] = {}
    for origin, service, broker, at, step, candidates, result in target.tuples(
            "explain_keys", {"keys": keys, "wildcards": wildcards},
            **params):  # ordered by key and step
        steps.setdefault((origin, service, broker, at), []).append(
            Step(step, tuple(candidates), result))
    return steps


class Option(NamedTuple):
    """One possible decision of a key (a row of resolve_route_options.sql): its outcome
    (deliver, send, delay, drop), the address it is sent to and the database it is
    delivered to, as ``Instance.route``'s RouteDecision has them."""

    outcome: str
    address: str | None
    database: str | None


def _options(target: Target, **params: Any) -> dict[Key, list[Option]]:
    options: dict[Key, list[Option]] = {}
    for row in target.tuples("decide_keys", **params):
        # columns of resolve_route_options.sql: origin, service_name, broker_instance,
        # routed_at, pick_group, outcome, route_name, address, mirror_address,
        # database_name, ... (ordered by key)
        options.setdefault(tuple(row[:4]), []).append(Option(row[5], row[7], row[9]))
    return options


def decide_keys(target: Target, keys: Iterable[tuple[str, str, str | None]],
                at: dt.datetime) -> dict[Key, list[Option]]:
    """Every possible decision at ``at`` of each of ``keys`` (origin, service name, broker
    identifier or None) on ``target``, in one query: (origin, service name, broker
    identifier, ``at``) -> its options (none for a key routing cannot read, such as an
    origin that is no database of the instance)."""
    wanted = list(dict.fromkeys(keys))
    if not wanted:
        return {}
    found = _options(target, origin=[k[0] for k in wanted],
                     service_name=[k[1] for k in wanted],
                     broker_instance=[k[2] for k in wanted], routed_at=at)
    return {(*k, at): found.get((*k, at), []) for k in wanted}


def explain_keys(target: Target, keys: Iterable[Key]) -> dict[Key, list[Step]]:
    """The routing process traced for each of ``keys`` on ``target``, in one query: key ->
    its steps in order, as ``Instance.explain`` gives them less the steps that saw no
    candidate and decided nothing (every key is in the answer)."""
    wanted = list(dict.fromkeys(keys))
    if not wanted:
        return {}
    found = _grouped(target, "bound", origin=[k[0] for k in wanted],
                     service_name=[k[1] for k in wanted],
                     broker_instance=[k[2] for k in wanted],
                     routed_at=[k[3] for k in wanted])
    return {k: found.get(k, []) for k in wanted}


def explain_routes(target: Target, at: dt.datetime, *, reached_wildcards_only: bool = False
                   ) -> dict[Key, list[Step]]:
    """The routing process traced at ``at`` for every route of ``target`` that has not
    expired (keyed by ``route_key``), in one query. ``reached_wildcards_only``: the wildcard
    routes are candidates only of the keys that reach R2.5 (a step 'not reached' lists
    none), for a rule that reads no candidates of a step not reached (D-RTE-002): a row
    fewer per route and wildcard."""
    return _grouped(target, "routes", "reached" if reached_wildcards_only else "every key",
                    probe_service=PROBE_SERVICE, routed_at=at)


def explain_endpoint_groups(target: Target, at: dt.datetime) -> dict[Key, list[Step]]:
    """The routing process traced at ``at`` for the far service and broker identifier of
    the conversation endpoints of each database that are neither CLOSED nor in ERROR (the
    groups of select_endpoint_lifetimes.sql, keyed by ``key``), in one query."""
    return _grouped(target, "endpoint_groups", routed_at=at)


def matching_step(steps: list[Any]) -> Any | None:
    """The R2 step that found the candidates (the first that found anything, R2)."""
    return next((s for s in steps if s.step.startswith("R2.") and s.result not in NOTHING),
                None)


def chosen_step(steps: list[Any]) -> Any | None:
    """The R3 step that chose (the first of them, R3)."""
    return next((s for s in steps if s.step.startswith("R3.") and s.result == "chosen"), None)
