"""The live engine's mirror of the routing catalog: the inputs of a decision in memory.

The point path (pybroker/core/routing/point.py) decides a key from the rows of
sql/routing/select_key_inputs.sql. Running that statement costs DuckDB's fixed price per
statement (~4-7 ms with 10,000 routes, 10-20 ms with 100,000), so this module keeps exactly
what it reads, per routing database, and hands the point path the same rows (the same
tuples, as a multiset) with no SQL at all:

- the routes of each database, grouped by the service they name (None: wildcards, R2.5;
  the dynamic routing service's name is a group like any other, R2.4), with their lifetime:
  an expired route is left out per decision by its ``routed_at`` (R1.4), and the sorted
  lifetimes give the next expiry (the engine's validity horizon) without a query;
- the pending route requests of each database, by service (R2.4);
- the services of each name, with their database's identifier, name and broker
  identifier (R2.6, R3.2, R4);
- the databases, name to identifier (the 'origin' row, R4.2); 'outside' routes with msdb's
  table (R1.2);
- the forwarding setting (R3.6).

Keeping it true. A write says what it changed (:class:`~pybroker.core.routing.cache.CatalogChange`)
and :meth:`CatalogMirror.mark` marks those parts stale. :meth:`CatalogMirror.refresh` reads
them again, each table with one bound query (``sql/routing/select_mirror_*.sql``) naming
only the changed databases and services (a list parameter), so a write on an instance of
100,000 routes reads the few routes it touched. The engine refreshes in the write path:
right after a change made outside a transaction, and when a transaction ends (commit or
rollback). Reads happen only while no transaction is open (under the store's lock), so the
mirror never holds uncommitted rows: after a rollback the parts marked inside it are simply
read again. While a part a key needs is stale (e.g. a change inside a transaction still
open, whose rows that transaction must see) :meth:`CatalogMirror.key_inputs` answers None
and the engine reads the key's inputs with select_key_inputs.sql instead. ``everything`` (a
database created, a write that says nothing more precise) reloads the whole mirror.

Writes that bypass CatalogChange are not seen: every API and T-SQL write goes through
``Kernel.write`` with its change; migrations run before the engine exists (msdb and its
AutoCreatedLocal come from them; a new database's AutoCreatedLocal comes with
``everything``); ``Instance.sql()`` is read-only; code writing on the raw connection must
call ``RoutingEngine.invalidate()`` (the tests that insert route requests do).

Threads. One lock guards the mirror; a decision holds it only to pick up a few rows, never
while running SQL. A refresh reads under the store's lock, builds outside every lock and
installs under the mirror's lock only if no change was marked meanwhile (a generation
count); otherwise the parts stay stale and the newer change's refresh reads them.

When it is loaded: eagerly, when the routing engine is created (the instance opened), so
that no decision waits for it, the first after opening included (loading at first need
would make that decision pay the whole load). The load costs one query per table: 35-50
ms with 10,000 routes and 0.5-0.8 s with 100,000 on a shared 2-CPU machine (DuckDB turning
rows into Python objects, then grouping them); a write marked ``everything`` (CREATE
DATABASE) pays it again. A process opening a large instance for one command pays it once.

Memory, measured with tracemalloc: 415-454 bytes per route (its row tuple and name, its
group and dictionary entries; repeated service names, broker identifiers and addresses are
kept once): 4.2 MB for 10,000 routes, 45 MB for 100,000.
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import gc
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pybroker.core.routing.cache import (
    DYNAMIC_ROUTING_SERVICE,
    OUTSIDE,
    CatalogChange,
    routing_database,
)
from pybroker.storage.store import Store

# One database's routes naming one service (or none): their rows as select_key_inputs.sql
# returns them, and their lifetimes (None when no route of the group expires).
_Group = tuple[tuple[tuple[Any, ...], ...], tuple[datetime | None, ...] | None]
# A partial refresh that moves more lifetimes than this rebuilds the sorted list instead.
_EXPIRY_EDITS = 256
_FRESH: Any = object()  # a database none of whose routes is stale


class CatalogMirror:
    """The rows of select_key_inputs.sql for any key, kept in memory (see the module)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._generation = 0
        # -- what is stale: marked by a change, not read again since ----------------------
        self._stale_everything = True  # nothing loaded yet
        # database name -> the services whose routes (and route requests) changed; None:
        # every route of the database
        self._stale_routes: dict[str, set[str | None] | None] = {}
        self._stale_services: set[str] = set()
        self._stale_forwarding = False
        self.pending = True  # any of the above (read without the lock: a hint)
        # -- the rows --------------------------------------------------------------------
        self._routes: dict[str, dict[str | None, _Group]] = {}
        self._requests: dict[str, set[str]] = {}
        self._services: dict[str, tuple[tuple[Any, ...], ...]] = {}
        self._databases: dict[int, tuple[str, str]] = {}  # id -> name, broker identifier
        self._origins: dict[str, tuple[Any, ...]] = {}  # name -> its 'origin' row
        self._forwarding: tuple[Any, ...] = _forwarding_row(None)
        self._expiries: list[datetime] = []  # every route's lifetime, sorted (R1.4)
        # every service name mentioned since the last full load (never fewer than the
        # catalog's: the engine's test for names it does not know, see cache.py)
        self._known: set[str] = set()

    # -- staleness -----------------------------------------------------------------------

    def mark(self, change: CatalogChange) -> None:
        """A write changed these inputs: they are stale until :meth:`refresh`."""
        with self._lock:
            self._generation += 1
            self._known |= change.named_services
            if change.everything:
                self._stale_everything = True
            if change.routes_of is not None:
                services = self._stale_routes.get(change.routes_of, set())
                if services is not None and change.route_services:
                    services = services | change.route_services
                else:  # a change of this database's routes that names none: all of them
                    services = None
                self._stale_routes[change.routes_of] = services
            self._stale_services |= change.services
            self._stale_forwarding = self._stale_forwarding or change.forwarding
            self.pending = True

    @property
    def fresh(self) -> bool:
        """Whether every part is as committed (nothing marked and not yet read again)."""
        return not self.pending

    # -- answers -------------------------------------------------------------------------

    def key_inputs(
        self, origin: str, service_name: str, routed_at: datetime
    ) -> list[tuple[Any, ...]] | None:
        """The rows select_key_inputs.sql returns for (origin, service_name, routed_at), in
        some order; None while a part they come from is stale."""
        database = routing_database(origin)  # R1.1, R1.2
        with self._lock:
            if (self._stale_everything or self._stale_forwarding
                    or service_name in self._stale_services):
                return None
            stale = self._stale_routes.get(database, _FRESH)
            if stale is not _FRESH and (
                stale is None or service_name in stale or None in stale
                or DYNAMIC_ROUTING_SERVICE in stale
            ):
                return None
            rows: list[tuple[Any, ...]] = []
            by_service = self._routes.get(database)
            if by_service:
                # R2.1-R2.3 the service's routes, R2.5 wildcards, R2.4 the dynamic routing
                # service's (once, when it is the service asked for)
                names: tuple[str | None, ...] = (service_name, None)
                if service_name != DYNAMIC_ROUTING_SERVICE:
                    names += (DYNAMIC_ROUTING_SERVICE,)
                for name in names:
                    group = by_service.get(name)
                    if group is None:
                        continue
                    found, lifetimes = group
                    if lifetimes is None:
                        rows.extend(found)
                    else:  # R1.4: a route past its lifetime is not there
                        rows.extend(row for row, lifetime in zip(found, lifetimes, strict=True)
                                    if lifetime is None or lifetime > routed_at)
            if service_name in self._requests.get(database, ()):
                rows.append(_request_row(service_name))
            rows.extend(self._services.get(service_name, ()))
            if origin != OUTSIDE:
                origin_row = self._origins.get(origin)
                if origin_row is not None:
                    rows.append(origin_row)
            rows.append(self._forwarding)
            return rows

    def next_expiry(self, after: datetime) -> tuple[bool, datetime | None]:
        """(known, the earliest route lifetime later than ``after``) as
        next_route_expiry.sql answers it (R1.4); known is False while routes are stale."""
        with self._lock:
            if self._stale_everything or self._stale_routes:
                return False, None
            index = bisect.bisect_right(self._expiries, after)
            return True, (self._expiries[index] if index < len(self._expiries) else None)

    def database_names(self) -> frozenset[str] | None:
        """The names of the instance's databases; None until loaded."""
        with self._lock:
            return None if self._stale_everything else frozenset(self._origins)

    def known_services(self) -> set[str] | None:
        """A set holding every service name the catalog mentions (a route's, a service's
        or a route request's; possibly more); None until loaded."""
        with self._lock:
            return None if self._stale_everything else set(self._known)

    # -- reading the catalog -----------------------------------------------------------

    def refresh(self, store: Store) -> bool:
        """Read the stale parts again (one bound query per table) unless a transaction is
        open; returns whether the mirror is then fresh."""
        with store.committed_reads() as committed:
            if not committed:
                return False
            with self._lock:
                if not self.pending:
                    return True
                generation = self._generation
                stale = _Stale(
                    self._stale_everything,
                    {db: None if s is None else set(s) for db, s in self._stale_routes.items()},
                    set(self._stale_services), self._stale_forwarding)
                databases = self._databases
            with _no_cyclic_gc():
                fetched = _fetch(store, stale, databases)
        with _no_cyclic_gc():
            routes = _groups(fetched.routes, fetched.databases)
        with self._lock:
            if self._generation != generation:
                return False  # changed meanwhile: the newer change's refresh reads it all
            if stale.everything:
                self._install_everything(fetched, routes)
            else:
                self._install_parts(stale, fetched, routes)
            self._stale_everything = self._stale_forwarding = False
            self._stale_routes.clear()
            self._stale_services.clear()
            self.pending = False
        return True

    def _install_everything(self, fetched: _Fetched, routes: dict) -> None:
        self._databases = fetched.databases
        self._origins = {name: _origin_row(database_id, name)
                         for database_id, (name, _guid) in fetched.databases.items()}
        self._routes = routes
        self._requests = {}
        for database, service in _named(fetched.requests, fetched.databases):
            self._requests.setdefault(database, set()).add(service)
        self._services = _service_groups(fetched.services, fetched.databases)
        self._forwarding = _forwarding_row(fetched.forwarding)
        self._expiries = self._all_expiries()
        self._known = {s for by_service in self._routes.values() for s in by_service
                       if s is not None}
        self._known.update(self._services)
        self._known.update(s for names in self._requests.values() for s in names)

    def _install_parts(self, stale: _Stale, fetched: _Fetched, routes: dict) -> None:
        if stale.routes:
            databases, names, wildcards = _route_filter(stale.routes)
            requests = list(_named(fetched.requests, fetched.databases))
            removed: list[datetime] = []
            added: list[datetime] = []
            for database in databases:
                by_service = self._routes.setdefault(database, {})
                replaced = list(by_service) if names is None else [
                    *names, *([None] if wildcards else [])]
                for service in replaced:
                    old = by_service.pop(service, None)
                    if old is not None and old[1] is not None:
                        removed.extend(lt for lt in old[1] if lt is not None)
                for service, group in routes.get(database, {}).items():
                    if service is not None:  # a change naming no service can bring new ones
                        self._known.add(service)
                    by_service[service] = group
                    if group[1] is not None:
                        added.extend(lt for lt in group[1] if lt is not None)
                if not by_service:
                    del self._routes[database]
                pending = self._requests.setdefault(database, set())
                if names is None:
                    pending.clear()
                else:
                    pending.difference_update(names)
                pending.update(s for db, s in requests if db == database)
                self._known.update(pending)
                if not pending:
                    del self._requests[database]
            self._move_expiries(removed, added)
        if stale.services:
            found = _service_groups(fetched.services, fetched.databases)
            for name in stale.services:
                if name in found:
                    self._services[name] = found[name]
                else:
                    self._services.pop(name, None)
        if stale.forwarding:
            self._forwarding = _forwarding_row(fetched.forwarding)

    def _move_expiries(self, removed: list[datetime], added: list[datetime]) -> None:
        if len(removed) + len(added) > _EXPIRY_EDITS:
            self._expiries = self._all_expiries()
            return
        for lifetime in removed:
            index = bisect.bisect_left(self._expiries, lifetime)
            if index < len(self._expiries) and self._expiries[index] == lifetime:
                del self._expiries[index]
        for lifetime in added:
            bisect.insort(self._expiries, lifetime)

    def _all_expiries(self) -> list[datetime]:
        return sorted(lifetime for by_service in self._routes.values()
                      for _rows, lifetimes in by_service.values() if lifetimes is not None
                      for lifetime in lifetimes if lifetime is not None)


# -- queries -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Stale:
    """What a refresh reads again (a copy of the marks when it began)."""

    everything: bool
    routes: dict[str, set[str | None] | None]
    services: set[str]
    forwarding: bool


@dataclass(frozen=True, slots=True)
class _Fetched:
    """The rows a refresh read; ``databases`` (id -> name, broker identifier) names the
    databases of the other rows: read with them for a full load, the mirror's otherwise
    (databases change only with ``everything``)."""

    databases: dict[int, tuple[str, str]]
    routes: list[tuple[Any, ...]] = field(default_factory=list)
    requests: list[tuple[Any, ...]] = field(default_factory=list)
    services: list[tuple[Any, ...]] = field(default_factory=list)
    forwarding: bool | None = None


def _fetch(store: Store, stale: _Stale, databases: dict[int, tuple[str, str]]) -> _Fetched:
    forwarding_sql = _sql("routing/select_mirror_forwarding.sql")
    if stale.everything:
        every = {"database_ids": None, "service_names": None}
        return _Fetched(
            {row[0]: (row[1], row[2])
             for row in store.fetchall(_sql("instance/select_databases.sql"))},
            store.fetchall(_sql("routing/select_mirror_routes.sql"),
                           {**every, "wildcards": True}),
            store.fetchall(_sql("routing/select_mirror_route_requests.sql"), every),
            store.fetchall(_sql("routing/select_mirror_services.sql"), {"service_names": None}),
            store.fetchall(forwarding_sql)[0][0],
        )
    fetched = _Fetched(databases)
    if stale.routes:
        names_to_ids = {name: database_id for database_id, (name, _) in databases.items()}
        database_names, names, wildcards = _route_filter(stale.routes)
        params = {"database_ids": [names_to_ids[d] for d in database_names
                                   if d in names_to_ids],
                  "service_names": names}
        fetched.routes.extend(store.fetchall(_sql("routing/select_mirror_routes.sql"),
                                             {**params, "wildcards": wildcards}))
        if names is None or names:
            fetched.requests.extend(store.fetchall(
                _sql("routing/select_mirror_route_requests.sql"), params))
    storable = sorted(s for s in stale.services if _storable(s))
    if storable:
        fetched.services.extend(store.fetchall(_sql("routing/select_mirror_services.sql"),
                                               {"service_names": storable}))
    if stale.forwarding:
        return dataclasses.replace(fetched, forwarding=store.fetchall(forwarding_sql)[0][0])
    return fetched


def _route_filter(
    routes: dict[str, set[str | None] | None],
) -> tuple[list[str], list[str] | None, bool]:
    """The databases and services to read again: every route of those databases named in
    both (the cross product: reading a part that did not change is harmless)."""
    databases = sorted(routes)
    if any(services is None for services in routes.values()):
        return databases, None, True
    names = {s for services in routes.values() if services for s in services}
    return databases, sorted(s for s in names if s is not None and _storable(s)), None in names


def _storable(name: str) -> bool:
    """Whether a name a change carries can be in the catalog at all (a refused write may
    name text that is not valid Unicode: no row has it, and DuckDB cannot bind it)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# -- rows ----------------------------------------------------------------------------------


def _groups(
    rows: Iterable[tuple[Any, ...]], databases: dict[int, tuple[str, str]],
) -> dict[str, dict[str | None, _Group]]:
    """Rows of select_mirror_routes.sql by database name and service: each route as the row
    select_key_inputs.sql returns for it (kind 'route'), with its lifetime. A repeated
    string (service, broker identifier, address) is kept once. A route of a database the
    mirror does not know is left out, as select_key_inputs.sql's join leaves it."""
    building: dict[str, dict[str | None, tuple[list, list]]] = {}
    share = {}.setdefault  # setdefault(None, None) is None too
    for database_id, service, name, broker, address, mirror, lifetime in rows:
        database = databases.get(database_id)
        if database is None:
            continue
        by_service = building.get(database[0])
        if by_service is None:
            by_service = building[database[0]] = {}
        group = by_service.get(service)
        if group is None:
            group = by_service[service] = ([], [])
        group[0].append(("route", name, share(service, service), share(broker, broker),
                         share(address, address), share(mirror, mirror), None, None, None))
        group[1].append(lifetime)
    return {database: {service: (tuple(found), tuple(lifetimes) if any(lifetimes) else None)
                       for service, (found, lifetimes) in by_service.items()}
            for database, by_service in building.items()}


def _named(rows: Iterable[tuple[Any, ...]],
           databases: dict[int, tuple[str, str]]) -> Iterator[tuple[str, Any]]:
    """(database name, value) for rows of (database identifier, value)."""
    for database_id, value in rows:
        database = databases.get(database_id)
        if database is not None:
            yield database[0], value


@contextlib.contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    """No cyclic garbage collection while hundreds of thousands of row tuples are made (it
    would walk the heap again and again: a 100,000-route load took several times longer).
    The tuples hold no cycles; reference counting still frees what is dropped."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _service_groups(
    rows: Iterable[tuple[Any, ...]], databases: dict[int, tuple[str, str]],
) -> dict[str, tuple[tuple[Any, ...], ...]]:
    """Services by name, as the rows of select_key_inputs.sql (kind 'service')."""
    grouped: dict[str, list[tuple[Any, ...]]] = {}
    for name, database_id in rows:
        database = databases.get(database_id)
        if database is not None:
            database_name, guid = database
            grouped.setdefault(name, []).append(
                ("service", None, name, guid, None, None, database_id, database_name, None))
    return {name: tuple(found) for name, found in grouped.items()}


def _request_row(service_name: str) -> tuple[Any, ...]:
    return ("request", None, service_name, None, None, None, None, None, None)


def _origin_row(database_id: int, name: str) -> tuple[Any, ...]:
    return ("origin", None, None, None, None, None, database_id, name, None)


def _forwarding_row(enabled: bool | None) -> tuple[Any, ...]:
    return ("forwarding", None, None, None, None, None, None, None, enabled)


def _sql(name: str) -> str:
    from pybroker.storage.templates import render

    return render(name)


__all__ = ["CatalogMirror"]
