"""The point path: the decision of one conversation key from its inputs, in Python.

A never-decided key would otherwise cost one run of the 30-CTE routing query (~18 ms,
mostly DuckDB planning and per-operator latency on tiny inputs). Here one bound query
(sql/routing/select_key_inputs.sql) fetches what the decision reads, and
:func:`route_option_rows` applies the steps of sql/routing/_route_steps.sql to those rows,
step for step and in the same order, returning exactly the rows
sql/routing/resolve_route_options.sql returns for the key (same columns, same order, same
weights). The set-based query stays the definition: tests/test_routing_cache.py checks the
two against each other after every step of random catalog changes, and batches of keys
still go through the query.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from pybroker.core.routing.cache import DYNAMIC_ROUTING_SERVICE, OUTSIDE, TRANSPORT_PREFIX, Key

# rows of select_key_inputs.sql: kind, name, service_name, broker_instance, address,
# mirror_address, database_id, database_name, is_forwarding_enabled
_KIND, _NAME, _SERVICE, _BROKER, _ADDRESS, _MIRROR, _DB_ID, _DB_NAME, _FORWARDING = range(9)


def route_option_rows(key: Key, routed_at: Any, inputs: Iterable[Sequence[Any]]) -> list[tuple]:
    """The rows of resolve_route_options.sql for ``key`` (broker identifier normalized)."""
    origin, service_name, broker_instance = key
    broker_key = broker_instance or ""
    outside = origin == OUTSIDE
    routes, services = [], []
    request_pending = False
    origin_database_id = None
    forwarding: int | None = None
    for row in inputs:
        kind = row[_KIND]
        if kind == "route":
            routes.append(row)
        elif kind == "service":
            services.append(row)
        elif kind == "request":
            request_pending = True
        elif kind == "origin":
            origin_database_id = row[_DB_ID]
        elif kind == "forwarding" and row[_FORWARDING] is not None:
            forwarding = 1 if row[_FORWARDING] else 0

    # -- R2: matching. Each candidate: (route_name, route_broker_key, address, mirror) ----
    service_routes = [
        (r[_NAME], r[_BROKER] or "", r[_ADDRESS], r[_MIRROR])
        for r in routes if r[_SERVICE] == service_name
    ]
    steps: list[list[tuple]] = [
        # R2.1: service and broker identifier both equal the conversation's
        [c for c in service_routes if broker_key != "" and c[1] == broker_key],
        # R2.2: service equal, no broker identifier
        [c for c in service_routes if c[1] == ""],
        # R2.3: the conversation names none; routes that name one
        [c for c in service_routes if broker_key == "" and c[1] != ""],
        # R2.4: a route to the dynamic routing service, no route request pending
        [(None, "", None, None)]
        if not request_pending and any(r[_SERVICE] == DYNAMIC_ROUTING_SERVICE for r in routes)
        else [],
        # R2.5: wildcards
        [(r[_NAME], "", r[_ADDRESS], r[_MIRROR])
         for r in routes if r[_SERVICE] is None and r[_BROKER] is None],
        # R2.6: an implicit LOCAL route when a broker identifier is named and the service
        # exists in this instance
        [(None, "", "LOCAL", None)] if broker_key != "" and services else [],
    ]
    match_order = next((i + 1 for i, step in enumerate(steps) if step), 7)
    decision_broker = broker_key or None
    if match_order in (4, 7):  # R2.4, R2.7: DELAYED by matching (dropped from outside)
        step = f"R2.{match_order}"
        return [(origin, service_name, broker_instance, routed_at, "",
                 "drop" if outside else "delay", None, None, None, None, decision_broker,
                 step, None, None, step, 1.0)]

    # -- R3: the candidate set; identical routes count as one (lowest name stands) -------
    groups: dict[tuple[str, str, str], list[Any]] = {}
    for name, route_broker, address, mirror in steps[match_order - 1]:
        pick_group = route_broker if match_order == 3 else ""
        group = groups.setdefault((pick_group, route_broker, address), [None, None])
        group[0] = _least(group[0], name)
        group[1] = _least(group[1], mirror)
    group_count = len({pick_group for pick_group, _, _ in groups})

    viable: list[tuple] = []  # pick_group, name, route_broker, choose, next_address, mirror,
    #                           database_name, guid, locate_step, route_address
    located: list[tuple] = []
    for (pick_group, route_broker, address), (name, mirror) in groups.items():
        if mirror is not None:
            choose = 1
        elif address == "LOCAL":
            choose = 2
        elif address == "TRANSPORT":
            choose = 4
        else:
            choose = 3
        if choose in (1, 3) or (choose == 4 and _transport_address(service_name) != ""):
            viable.append((pick_group, name, route_broker, choose, address, mirror, None, None,
                           None, address))
        elif choose == 2:
            # R4.1 / R4.2: where the LOCAL route would deliver (R4.3: nowhere -> not viable)
            locate_broker = broker_key or route_broker
            for s in services:
                if locate_broker == "" or s[_BROKER] == locate_broker:
                    located.append((pick_group, name, route_broker, address, mirror, s[_DB_ID],
                                    s[_DB_NAME], s[_BROKER],
                                    "R4.1" if locate_broker else "R4.2"))
    for row in located:
        pick_group, name, route_broker, address, mirror, db_id, db_name, guid, locate = row
        # R4.2: the database that holds the conversation first, when it has the service
        own = origin_database_id is not None and any(
            o[0] == pick_group and o[2] == route_broker and o[3] == address
            and o[8] == "R4.2" and o[5] == origin_database_id
            for o in located
        )
        if locate == "R4.1" or not own or db_id == origin_database_id:
            viable.append((pick_group, name, route_broker, 2, None, mirror, db_name, guid,
                           locate, address))

    choose_step: dict[str, int] = {}
    for v in viable:
        choose_step[v[0]] = min(choose_step.get(v[0], 99), v[3])
    chosen = [v for v in viable if v[3] == choose_step[v[0]]]
    route_count: dict[str, set[tuple[str, str]]] = {}
    same_route: dict[tuple[str, str, str], int] = {}
    for v in chosen:
        route_count.setdefault(v[0], set()).add((v[2], v[9]))
        same_route[(v[0], v[2], v[9])] = same_route.get((v[0], v[2], v[9]), 0) + 1

    rows: list[tuple] = []
    match_step = f"R2.{match_order}"
    for v in chosen:
        pick_group, name, route_broker, choose, next_address, mirror, db_name, guid, locate, \
            route_address = v
        weight = 1.0 / (group_count * len(route_count[pick_group])
                        * same_route[(pick_group, route_broker, route_address)])
        dropped = choose != 2 and outside and forwarding == 0  # R3.6
        if choose == 2:
            outcome = "deliver"
        elif dropped:
            outcome = "drop"
        else:
            outcome = "send"
        if choose == 2:
            decided_broker = guid
        elif broker_key:
            decided_broker = broker_key
        else:
            decided_broker = route_broker or None
        address = _transport_address(service_name) if choose == 4 else next_address
        rows.append((outcome, name, address, mirror, db_name, decided_broker, match_step,
                     f"R3.{choose}", locate, "R3.6" if dropped else f"R3.{choose}", weight,
                     pick_group))
    for pick_group in dict.fromkeys(g[0] for g in groups):
        if pick_group not in choose_step:  # R3.5: no step could choose
            rows.append(("drop" if outside else "delay", None, None, None, None,
                         decision_broker, match_step, "R3.5", None, "R3.5",
                         1.0 / group_count, pick_group))
    # resolve_route_options.sql: ORDER BY pick_group, outcome, route_name, database_name
    # (ascending, NULLs last)
    rows.sort(key=lambda r: (r[11], r[0], _nulls_last(r[1]), _nulls_last(r[4])))
    return [(origin, service_name, broker_instance, routed_at, r[11], *r[:10], r[10])
            for r in rows]


def _least(current: str | None, value: str | None) -> str | None:
    """SQL's MIN: NULLs ignored."""
    if value is None:
        return current
    return value if current is None or value < current else current


def _nulls_last(value: str | None) -> tuple[bool, str]:
    return (value is None, value or "")


def _transport_address(service_name: str) -> str:
    """R10.6: the tcp://host:port that begins the service name, '' when none does (as
    REGEXP_EXTRACT answers)."""
    found = TRANSPORT_PREFIX.match(service_name)
    return found.group(0) if found else ""
