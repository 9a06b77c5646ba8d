"""Routing explained for many conversation keys in one query (sql/diagnose/explain_keys.sql,
which includes sql/routing/explain_route.sql): what ``Instance.explain`` answers for one key,
asked for every route or every group of conversations of an instance at once. The routing
rules of diagnose ask their questions through here, so that reading an instance of 10,000
routes is a few queries, not one per route.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

from pybroker.apps.diagnose.targets import Target
from pybroker.core.routing.definition import normalize_guid
from pybroker.core.routing.engine import OUTSIDE, ExplainStep

# (origin, service name, broker identifier or None, the instant expiry is judged at)
Key = tuple[str, str, str | None, dt.datetime]

# An R2 step's results that found no candidates.
NOTHING = ("no route", "not applicable", "not reached")


def origin_of(database: str) -> str:
    """The origin a database's routing table is asked with: msdb routes what comes in
    (R1.2)."""
    return OUTSIDE if database == "msdb" else database


def key(database: str, service: str, broker: str | None, at: dt.datetime) -> Key:
    """The key a conversation of ``database`` with ``service`` (and ``broker``) is routed
    by at ``at``, in the spelling the answers carry (a broker identifier in lower case)."""
    return (origin_of(database), service, None if broker is None else normalize_guid(broker),
            at)


def explain_keys(target: Target, keys: Iterable[Key]) -> dict[Key, list[ExplainStep]]:
    """The routing process traced for each of ``keys`` (made by ``key``) on ``target``, in
    one query: key -> its steps in order, as ``Instance.explain`` gives them."""
    wanted = list(dict.fromkeys(keys))
    if not wanted:
        return {}
    rows = target.query("explain_keys", origin=[k[0] for k in wanted],
                        service_name=[k[1] for k in wanted],
                        broker_instance=[k[2] for k in wanted],
                        routed_at=[k[3] for k in wanted])
    steps: dict[Key, list[ExplainStep]] = {k: [] for k in wanted}
    for row in rows:  # ordered by key and step (explain_route.sql)
        found = steps.get((row["origin"], row["service_name"], row["broker_instance"],
                           row["routed_at"]))
        if found is not None:
            found.append(ExplainStep(row["step"], row["description"],
                                     tuple(row["candidates"]), row["result"]))
    return steps


def matching_step(steps: list[Any]) -> Any | None:
    """The R2 step that found the candidates (the first that found anything, R2)."""
    return next((s for s in steps if s.step.startswith("R2.") and s.result not in NOTHING),
                None)


def chosen_step(steps: list[Any]) -> Any | None:
    """The R3 step that chose (the first of them, R3)."""
    return next((s for s in steps if s.step.startswith("R3.") and s.result == "chosen"), None)
