"""The public API: an Instance (one DuckDB file) holding Databases, their queues, services
and routes, and the routing decisions made over them."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any

import duckdb

from pybroker.errors import AlreadyExistsError, BrokerError, NotFoundError, RouteDefinitionError
from pybroker.routing.cache import EVERYTHING, NOTHING, CatalogChange
from pybroker.routing.decision import RouteDecision
from pybroker.routing.definition import (
    MAX_VALUE_LENGTH,
    RouteDefinition,
    check_lifetime,
    check_name,
    normalize_guid,
    validate_route,
)
from pybroker.routing.engine import OUTSIDE, ExplainStep, RoutingEngine, to_utc_datetime
from pybroker.storage import Store

_ROUTE_CLAUSES = ("service_name", "broker_instance", "lifetime", "address", "mirror_address")


@dataclass(frozen=True, slots=True)
class Route:
    """A row of a routing table (sys.routes)."""

    name: str
    route_id: int
    remote_service_name: str | None
    broker_instance: str | None
    lifetime: datetime | None  # UTC expiry; None never expires
    address: str
    mirror_address: str | None
    is_expired: bool


@dataclass(frozen=True, slots=True)
class Service:
    name: str
    queue: str


@dataclass(frozen=True, slots=True)
class Queue:
    name: str
    status: bool  # ON (True) or OFF


def connect(path: str | Path | None = None, *, clock: Callable[[], float] | None = None):
    """Open (or create) the instance file at ``path``; ``None`` keeps the instance in memory.

    ``clock`` returns the current time as epoch seconds (tests pass a fake one).
    """
    return Instance(path, clock=clock)


class Instance:
    """One broker instance: its databases (master and msdb always), settings and routing."""

    def __init__(
        self, path: str | Path | None = None, *, clock: Callable[[], float] | None = None
    ) -> None:
        if path is not None and not isinstance(path, (str, Path)):
            raise BrokerError(f"path must be a file path or None, not {type(path).__name__}")
        self._clock = clock or time.time
        self._store = Store(path)
        self._routing = RoutingEngine(self._store, self._clock)
        self._closed = False

    # -- lifecycle -----------------------------------------------------------------------

    @property
    def path(self) -> Path | None:
        return self._store.path

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._store.close()

    def __enter__(self) -> Instance:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _now(self) -> datetime:
        return to_utc_datetime(self._clock())

    def _write(self, change: CatalogChange = EVERYTHING) -> _Write:
        """One write transaction; ``change`` says which routing answers it can alter."""
        if self._closed:
            raise BrokerError("the instance is closed")
        return _Write(self, change)

    # -- databases -----------------------------------------------------------------------

    def create_database(self, name: str, broker_instance: str | None = None) -> Database:
        """Create a database with its own broker identifier and AutoCreatedLocal (R1.3)."""
        check_name("database", name)
        if name == OUTSIDE:
            raise BrokerError(
                "'outside' cannot name a database: it stands for messages from outside the "
                "instance when routing"
            )
        guid = str(uuid.uuid4()) if broker_instance is None else normalize_guid(broker_instance)
        with self._write():
            if self._store.run("instance/select_database.sql", {"name": name}):
                raise AlreadyExistsError(f"database {name!r} already exists")
            for db in self.databases():
                if db.broker_instance == guid:
                    raise AlreadyExistsError(
                        f"broker_instance {guid} is already the identifier of database "
                        f"{db.name!r}"
                    )
            now = self._now()
            database_id = self._store.run(
                "instance/insert_database.sql",
                {"name": name, "service_broker_guid": guid, "now": now},
            )[0][0]
            self._store.run(
                "instance/insert_route.sql",
                {
                    "database_id": database_id, "name": "AutoCreatedLocal",
                    "remote_service_name": None, "broker_instance": None, "lifetime": None,
                    "address": "LOCAL", "mirror_address": None, "now": now,
                },
            )
        return Database(self, database_id, name, guid)

    def database(self, name: str) -> Database:
        rows = self._store.run("instance/select_database.sql", {"name": name})
        if not rows:
            raise NotFoundError(f"database {name!r} does not exist in this instance")
        database_id, db_name, guid = rows[0]
        return Database(self, database_id, db_name, guid)

    def databases(self) -> list[Database]:
        return [Database(self, *row) for row in self._store.run("instance/select_databases.sql")]

    # -- settings ------------------------------------------------------------------------

    @property
    def forwarding(self) -> bool:
        """R7.3: whether messages from outside may be forwarded (off by default)."""
        return bool(self._store.run("instance/select_settings.sql")[0][0])

    @forwarding.setter
    def forwarding(self, enabled: bool) -> None:
        if not isinstance(enabled, bool):
            raise BrokerError(f"forwarding must be True or False, not {enabled!r}")
        with self._write(CatalogChange(forwarding=True)):  # R3.6
            self._store.run("instance/update_forwarding.sql", {"enabled": enabled})

    @property
    def forwarding_size_mb(self) -> int:
        """R7.3: the memory bound for messages being forwarded, in MB (default 10)."""
        return int(self._store.run("instance/select_settings.sql")[0][1])

    @forwarding_size_mb.setter
    def forwarding_size_mb(self, size_mb: int) -> None:
        if isinstance(size_mb, bool) or not isinstance(size_mb, int) or size_mb <= 0:
            raise BrokerError(f"forwarding_size_mb must be a positive whole number: {size_mb!r}")
        with self._write(NOTHING):  # routing does not read the bound
            self._store.run("instance/update_forwarding_size.sql", {"size_mb": size_mb})

    # -- routing -------------------------------------------------------------------------

    def route(
        self, service_name: str, *, broker_instance: str | None = None, origin: str
    ) -> RouteDecision:
        """Decide where a conversation goes (SPEC R1-R4).

        ``origin`` is the database the conversation was begun in, or ``"outside"`` for a
        message that arrived from outside the instance (routed with msdb's table, R1.2).
        """
        return self._routing.route(origin, service_name, broker_instance)

    def route_many(
        self, conversations: Iterable[tuple[str, str, str | None]]
    ) -> list[RouteDecision]:
        """Decide for many (origin, service_name, broker_instance) at once (one query)."""
        return self._routing.route_many(conversations)

    def explain(
        self, service_name: str, *, broker_instance: str | None = None, origin: str
    ) -> list[ExplainStep]:
        """The routing process traced, one row per step with the candidates it saw."""
        return self._routing.explain(origin, service_name, broker_instance)

    def sql(self, query: str, params: Any = None) -> duckdb.DuckDBPyRelation:
        """Run a read-only query on the instance file (the sys.* views, route_decision())."""
        return self._store.connection.sql(query, params=params)


class _Write:
    """One API write: a single transaction. The routing answers the change can alter are
    voided (a rollback voids them all, see RoutingEngine), and once the outermost write
    has committed, the voided keys that were in use are decided again."""

    def __init__(self, instance: Instance, change: CatalogChange) -> None:
        self._instance = instance
        self._change = change
        self._tx = instance._store.transaction()

    def __enter__(self) -> None:
        self._tx.__enter__()

    def __exit__(self, exc_type, exc, tb) -> bool | None:
        routing = self._instance._routing
        try:
            if isinstance(exc, duckdb.Error):
                self._tx.__exit__(exc_type, exc, tb)
                raise BrokerError(f"the change was not made: {exc}") from exc
            return self._tx.__exit__(exc_type, exc, tb)
        finally:
            routing.changed(self._change)
            if exc is None and not self._instance._store.in_transaction:
                routing.redecide()


class Database:
    """A database of the instance: its own broker identifier, routing table and services."""

    def __init__(self, instance: Instance, database_id: int, name: str, broker_instance: str):
        self._instance = instance
        self._store = instance._store
        self.database_id = database_id
        self.name = name
        self.broker_instance = broker_instance

    def __repr__(self) -> str:
        return f"Database(name={self.name!r}, broker_instance={self.broker_instance!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Database) and other.database_id == self.database_id and (
            other._instance is self._instance
        )

    def __hash__(self) -> int:
        return hash((id(self._instance), self.database_id))

    # -- queues and services -------------------------------------------------------------

    def create_queue(self, name: str, status: bool = True) -> Queue:
        check_name("queue", name)
        if not isinstance(status, bool):
            raise BrokerError(f"queue status must be True (ON) or False (OFF), not {status!r}")
        with self._instance._write(NOTHING):  # routing reads services, not queues
            if any(q.name == name for q in self.queues()):
                raise AlreadyExistsError(f"queue {name!r} already exists in {self.name!r}")
            self._store.run(
                "instance/insert_queue.sql",
                {"database_id": self.database_id, "name": name, "status": status,
                 "now": self._instance._now()},
            )
        return Queue(name, status)

    def queues(self) -> list[Queue]:
        rows = self._store.run("instance/select_queues.sql", {"database_id": self.database_id})
        return [Queue(name, bool(status)) for name, status in rows]

    def create_service(self, name: str, queue: str) -> Service:
        check_name("service", name, MAX_VALUE_LENGTH)
        check_name("queue", queue)
        with self._instance._write(CatalogChange(services=frozenset([name]))):  # R2.6, R4
            if not any(q.name == queue for q in self.queues()):
                raise NotFoundError(
                    f"queue {queue!r} does not exist in database {self.name!r}; create it first"
                )
            if any(s.name == name for s in self.services()):
                raise AlreadyExistsError(f"service {name!r} already exists in {self.name!r}")
            self._store.run(
                "instance/insert_service.sql",
                {"database_id": self.database_id, "name": name, "queue_name": queue,
                 "now": self._instance._now()},
            )
        return Service(name, queue)

    def services(self) -> list[Service]:
        rows = self._store.run("instance/select_services.sql", {"database_id": self.database_id})
        return [Service(*row) for row in rows]

    # -- routes --------------------------------------------------------------------------

    def create_route(
        self,
        name: str,
        *,
        service_name: str | None = None,
        broker_instance: str | None = None,
        address: str,
        mirror_address: str | None = None,
        lifetime: int | None = None,
    ) -> Route:
        """CREATE ROUTE (R10): lifetime in seconds from now; None never expires."""
        definition = validate_route(
            name, address=address, service_name=service_name,
            broker_instance=broker_instance, lifetime=lifetime, mirror_address=mirror_address,
        )
        with self._instance._write(self._route_change(definition.service_name)):
            if self._find_route(definition.name) is not None:
                raise RouteDefinitionError(
                    f"route {definition.name!r} already exists in database {self.name!r} "
                    "(route names are unique per database)",
                    rule="R10.2",
                )
            self._store.run("instance/insert_route.sql", self._route_params(definition))
        return self.route(definition.name)

    def alter_route(self, name: str, **changes: Any) -> Route:
        """ALTER ROUTE: changes only the clauses given. '' removes SERVICE_NAME,
        BROKER_INSTANCE or MIRROR_ADDRESS, as in SQL Server; the result must obey R10.2."""
        unknown = set(changes) - set(_ROUTE_CLAUSES)
        if unknown:
            raise BrokerError(
                f"ALTER ROUTE cannot change {', '.join(sorted(unknown))}; "
                f"it changes {', '.join(_ROUTE_CLAUSES)}"
            )
        if not changes:
            raise BrokerError("ALTER ROUTE needs at least one clause to change")
        current = self._find_route(name)
        if current is None:
            raise NotFoundError(f"route {name!r} does not exist in database {self.name!r}")
        new_service = changes.get("service_name", current.remote_service_name) or None
        if not isinstance(new_service, str):
            new_service = None  # refused below; meanwhile void as for a wildcard
        with self._instance._write(
            self._route_change(current.remote_service_name, new_service)
        ):
            current = self._find_route(name)
            if current is None:
                raise NotFoundError(f"route {name!r} does not exist in database {self.name!r}")
            merged: dict[str, Any] = {
                "service_name": current.remote_service_name,
                "broker_instance": current.broker_instance,
                "address": current.address,
                "mirror_address": current.mirror_address,
            }
            for clause in ("service_name", "broker_instance", "mirror_address"):
                if clause in changes:
                    merged[clause] = changes[clause] if changes[clause] != "" else None
            if "address" in changes:
                merged["address"] = changes["address"]
            definition = validate_route(
                name, lifetime=changes.get("lifetime"), **merged
            )
            params = self._route_params(definition)
            del params["now"]  # an ALTER keeps create_date
            if "lifetime" not in changes:
                params["lifetime"] = current.lifetime  # R10.4: keep the expiry unless given
            self._store.run("instance/update_route.sql", params)
        return self.route(name)

    def drop_route(self, name: str) -> None:
        """DROP ROUTE; dropping a route in use is allowed (R10.5)."""
        dropped = self._find_route(name)
        if dropped is None:
            raise NotFoundError(f"route {name!r} does not exist in database {self.name!r}")
        with self._instance._write(self._route_change(dropped.remote_service_name)):  # R10.5
            deleted = self._store.run(
                "instance/delete_route.sql", {"database_id": self.database_id, "name": name}
            )
            if not deleted:
                raise NotFoundError(f"route {name!r} does not exist in database {self.name!r}")

    def routes(self) -> list[Route]:
        rows = self._store.run("instance/select_routes.sql", {"database_id": self.database_id})
        return [self._route_from_row(row) for row in rows]

    def route(self, name: str) -> Route:
        found = self._find_route(name)
        if found is None:
            raise NotFoundError(f"route {name!r} does not exist in database {self.name!r}")
        return found

    def execute(self, tsql: str) -> None:
        """Run T-SQL route DDL: CREATE ROUTE, ALTER ROUTE, DROP ROUTE (R10).

        A batch of several statements is all or nothing.
        """
        from pybroker.tsql import AlterRoute, CreateRoute, DropRoute, parse_batch

        if not isinstance(tsql, str):
            raise BrokerError(f"execute() takes T-SQL text, not {type(tsql).__name__}")
        statements = parse_batch(tsql)
        with self._instance._write(NOTHING):  # each statement says what it changes
            for statement in statements:
                if isinstance(statement, CreateRoute):
                    self.create_route(
                        statement.name, service_name=statement.service_name,
                        broker_instance=statement.broker_instance, address=statement.address,
                        mirror_address=statement.mirror_address, lifetime=statement.lifetime,
                    )
                elif isinstance(statement, AlterRoute):
                    self.alter_route(statement.name, **dict(statement.changes))
                elif isinstance(statement, DropRoute):
                    self.drop_route(statement.name)
                else:  # pragma: no cover - parse_batch returns only these
                    raise BrokerError(f"cannot run {statement!r}")

    # -- internals -----------------------------------------------------------------------

    def _route_change(self, *service_names: str | None) -> CatalogChange:
        """A route of this database naming these services (None: a wildcard) changed."""
        return CatalogChange(routes_of=self.name, route_services=frozenset(service_names))

    def _find_route(self, name: str) -> Route | None:
        check_name("route", name)
        rows = self._store.run(
            "instance/select_route.sql", {"database_id": self.database_id, "name": name}
        )
        return self._route_from_row(rows[0]) if rows else None

    def _route_from_row(self, row: tuple[Any, ...]) -> Route:
        name, route_id, service, broker, lifetime, address, mirror = row
        expired = lifetime is not None and lifetime <= self._instance._now()
        return Route(name, route_id, service, broker, lifetime, address, mirror, expired)

    def _route_params(self, definition: RouteDefinition) -> dict[str, Any]:
        now = self._instance._now()
        lifetime = check_lifetime(definition.lifetime)
        return {
            "database_id": self.database_id,
            "name": definition.name,
            "remote_service_name": definition.service_name,
            "broker_instance": definition.broker_instance,
            "lifetime": None if lifetime is None else now + timedelta(seconds=lifetime),
            "address": definition.address,
            "mirror_address": definition.mirror_address,
            "now": now,
        }
