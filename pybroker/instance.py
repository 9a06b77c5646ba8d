"""The public API: an Instance (one DuckDB file) holding Databases, their queues, services
and routes, and the routing decisions made over them."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any

import duckdb

from pybroker import arguments
from pybroker.arguments import check_read_only_query
from pybroker.conversation.api import Conversation, Message
from pybroker.conversation.endpoint_cache import DEFAULT_ENDPOINT_CACHE
from pybroker.conversation.engine import (
    SYSTEM_PREFIX,
    VALIDATION_CODES,
    VALIDATION_NAMES,
    Messaging,
)
from pybroker.conversation.worker import Worker
from pybroker.errors import (
    AlreadyExistsError,
    BrokerError,
    InUseError,
    InvalidArgumentError,
    NotFoundError,
    RouteDefinitionError,
    StorageError,
    WireError,
)
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
from pybroker.storage import Store, damage_reason, damaged_message, translate_error
from pybroker.wire.endpoint import (
    Endpoint,
    endpoint_identity,
    settings_for,
    trust,
    untrust,
)
from pybroker.wire.server_ddl import (
    MASTER_DATABASE_ID,
    SERVER_STATEMENTS,
    DefinedEndpoint,
    ServerBatch,
)

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
    contracts: tuple[str, ...] = ()  # the contracts it accepts as a target


@dataclass(frozen=True, slots=True)
class Queue:
    name: str
    status: bool  # ON (True) or OFF
    retention: bool = False
    poison_message_handling: bool = True


@dataclass(frozen=True, slots=True)
class MessageType:
    name: str
    validation: str  # NONE, EMPTY or WELL_FORMED_XML
    is_system: bool = False


@dataclass(frozen=True, slots=True)
class Contract:
    name: str
    messages: tuple[tuple[str, str], ...]  # (message type, INITIATOR / TARGET / ANY)
    is_system: bool = False


_SENT_BY = ("INITIATOR", "TARGET", "ANY")


def connect(
    path: str | Path | None = None,
    *,
    clock: Callable[[], float] | None = None,
    retry_scale: float = 1.0,
    worker: bool = True,
    endpoint_cache: int = DEFAULT_ENDPOINT_CACHE,
    read_only: bool = False,
) -> Instance:
    """Open (or create) the instance file at ``path``; ``None`` keeps the instance in memory.

    ``read_only=True`` opens an existing instance file for reading only: nothing is written
    (not even the catalog views), so it works on a read-only file and beside other read-only
    readers (the DuckDB CLI with ``-readonly``); every write raises StorageError. A DuckDB
    file that is not an instance is refused either way (pybroker never adds its tables to
    someone else's database), and so is a damaged file.

    ``clock`` returns the current time as epoch seconds (tests pass a fake one).
    ``retry_scale`` multiplies every retry time-out of the transmission queue (C5: 4, 8, 16,
    32, then every 64 s; 0.001 makes that milliseconds). ``worker=False`` starts no
    background worker: the delay/retry loop then runs only when ``Instance.run_pending()``
    is called (tests drive it step by step with their clock). ``endpoint_cache`` is how
    many conversation endpoints stay in memory (the most recently used; P7): idle ones are
    read again from the file when used.
    """
    return Instance(path, clock=clock, retry_scale=retry_scale, worker=worker,
                    endpoint_cache=endpoint_cache, read_only=read_only)


class Instance:
    """One broker instance: its databases (master and msdb always), settings and routing."""

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        clock: Callable[[], float] | None = None,
        retry_scale: float = 1.0,
        worker: bool = True,
        endpoint_cache: int = DEFAULT_ENDPOINT_CACHE,
        read_only: bool = False,
    ) -> None:
        if path is not None and not isinstance(path, (str, Path)):
            raise InvalidArgumentError(
                f"path must be a file path or None, not {type(path).__name__}")
        if isinstance(path, str):
            arguments.text("path", path)
        elif isinstance(path, Path):
            arguments.text("path", str(path))
        clock = arguments.clock(clock)
        arguments.real_number("retry_scale", retry_scale, minimum=1e-9, maximum=1e9)
        arguments.flag("worker", worker)
        arguments.flag("read_only", read_only)
        if read_only and path is None:
            raise InvalidArgumentError("read_only needs the path of an existing instance file")
        if clock is not None:
            given = clock

            def clock() -> float:  # what a caller's clock says is checked too
                return arguments.now(given())

        self._clock = clock or time.time
        self._store = Store(path, read_only=read_only)
        self._routing = RoutingEngine(self._store, self._clock)
        self._closed = False
        self._write_depth = 0
        try:
            self._messaging = Messaging(self, retry_scale=retry_scale,
                                        endpoint_cache=endpoint_cache)
        except BaseException:
            self._store.close()
            raise
        self._worker: Worker | None = None
        self._endpoint: Endpoint | None = None
        # what CREATE ENDPOINT on master defined (pybroker.wire.server_ddl), for the life of
        # this Instance: like start_endpoint(), it is not kept in the file
        self._endpoint_definition: DefinedEndpoint | None = None
        if worker and not read_only:  # the worker writes (retries, timers, expiry)
            self._worker = Worker(self._messaging, self._clock)
            self._worker.start()

    # -- lifecycle -----------------------------------------------------------------------

    @property
    def path(self) -> Path | None:
        return self._store.path

    def close(self) -> None:
        if not self._closed:
            if self._endpoint is not None:
                self._endpoint.close()
            if self._worker is not None:
                self._worker.stop()
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

    @property
    def read_only(self) -> bool:
        """Whether the instance file was opened with ``read_only=True``."""
        return self._store.read_only

    def _write(self, change: CatalogChange = EVERYTHING) -> _Write:
        """One write transaction; ``change`` says which routing answers it can alter."""
        if self._closed:
            raise BrokerError("the instance is closed")
        self._store.check_writable()
        return _Write(self, change)

    def _database_by_id(self, database_id: int) -> Database:
        for db in self.databases():
            if db.database_id == database_id:
                return db
        raise NotFoundError(f"database id {database_id} does not exist in this instance")

    # -- the broker endpoint (P2) ------------------------------------------------------

    def start_endpoint(
        self,
        port: int = 4022,
        host: str = "127.0.0.1",
        *,
        idle_timeout: float | None = None,
        fragment_size: int | None = None,
        connect_timeout: float | None = None,
        handshake_timeout: float | None = None,
        max_connections: int | None = None,
        encryption: bool = True,
    ) -> Endpoint:
        """Listen for adjacent brokers on ``host:port`` (``port=0``: a free port) and send
        the messages whose route names a network address. Mutual TLS with this instance's
        certificate; only peers admitted with ``trust()`` can connect, either way.
        ``idle_timeout`` (default 90 s) closes a connection nothing flowed on;
        ``fragment_size`` (default 1 MiB) is the largest fragment a message travels in.
        ``encryption=False`` (SQL Server's ENCRYPTION = DISABLED) speaks without TLS: peers
        still must be trusted, and every dialog frame is still signed (P6)."""
        if self._closed:
            raise BrokerError("the instance is closed")
        if self._endpoint is not None and not self._endpoint.is_closed:
            raise WireError(
                f"the broker endpoint of this instance is already started, on "
                f"{self._endpoint.address}; close it first")
        settings = settings_for(
            port, host, self._messaging.retry_scale, idle_timeout=idle_timeout,
            fragment_size=fragment_size, connect_timeout=connect_timeout,
            handshake_timeout=handshake_timeout, max_connections=max_connections,
            encryption=encryption)
        self._endpoint = Endpoint(self, settings)
        return self._endpoint

    @property
    def endpoint(self) -> Endpoint | None:
        """The running broker endpoint, if started."""
        return self._endpoint

    @property
    def certificate(self) -> str:
        """This instance's endpoint certificate (PEM), made on first need; its private
        key stays in the instance file."""
        return endpoint_identity(self).certificate

    def trust(self, name: str, pem: str) -> None:
        """Admit the peer instance whose endpoint certificate is ``pem`` as ``name``
        (replacing a certificate of that name)."""
        trust(self, name, pem)

    def untrust(self, name: str) -> None:
        """Stop admitting the peer ``name``; its connections are closed."""
        untrust(self, name)

    def run_pending_all(self) -> None:
        """Retry every waiting transmission now (a transport or route appeared)."""
        self._messaging.run_pending(retry_all=True)

    # -- the delay/retry loop ------------------------------------------------------------

    def run_pending(self, now: float | None = None) -> int:
        """Run the delay/retry loop once at ``now`` (epoch seconds; default the clock):
        expire conversation lifetimes (C2: error -8489), fire conversation timers
        (DialogTimer), retry waiting transmissions whose back-off has passed (C5).
        The background worker calls this when something is due; tests call it with their
        clock. Returns how many conversation endpoints it acted on."""
        if self._closed:
            raise BrokerError("the instance is closed")
        if now is not None:
            arguments.now(now)
        self._store.check_writable()
        return self._messaging.run_pending(now)

    @property
    def max_message_size(self) -> int:
        """The largest message body SEND accepts, in bytes (default 2,147,483,647)."""
        return self._messaging.max_message_size

    @max_message_size.setter
    def max_message_size(self, size: int) -> None:
        arguments.whole_number("max_message_size", size, minimum=1,
                               maximum=arguments.INT64_MAX)
        with self._write(NOTHING):
            self._store.run("instance/update_max_message_size.sql", {"size": size})

    # -- databases -----------------------------------------------------------------------

    def create_database(self, name: str, broker_instance: str | None = None) -> Database:
        """Create a database with its own broker identifier and AutoCreatedLocal (R1.3)."""
        check_name("database", name)
        if name.lower() == OUTSIDE:
            raise InvalidArgumentError(
                f"{name!r} cannot name a database: 'outside' (in any case) stands for "
                "messages from outside the instance when routing"
            )
        guid = str(uuid.uuid4()) if broker_instance is None else normalize_guid(broker_instance)
        with self._write():
            for db in self.databases():
                if db.name.lower() == name.lower():  # database names ignore case
                    raise AlreadyExistsError(
                        f"database {name!r} already exists"
                        + ("" if db.name == name else f" as {db.name!r} (database names are "
                           "unique without regard to case)"))
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
            system = {"database_id": database_id, "now": now}
            self._store.run("conversation/insert_system_message_types.sql", system)  # C2
            self._store.run("conversation/insert_system_contracts.sql", system)
            self._store.run("conversation/insert_system_contract_message_usages.sql",
                            {"database_id": database_id})
        return Database(self, database_id, name, guid)

    def database(self, name: str) -> Database:
        check_name("database", name)
        rows = self._store.run("instance/select_database.sql", {"name": name})
        if not rows:
            raise NotFoundError(f"database {name!r} does not exist in this instance"
                                + _did_you_mean(name, [d.name for d in self.databases()]))
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
        arguments.whole_number("forwarding_size_mb", size_mb, minimum=1,
                               maximum=arguments.INT32_MAX)
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
        try:
            return self._routing.route(origin, service_name, broker_instance)
        except (TypeError, NotFoundError):  # say which argument is wrong, when one is
            _check_key(origin, service_name, broker_instance)
            raise


    def route_many(
        self, conversations: Iterable[tuple[str, str, str | None]]
    ) -> list[RouteDecision]:
        """Decide for many (origin, service_name, broker_instance) at once (one query)."""
        keys = arguments.sequence("conversations", conversations)
        for index, key in enumerate(keys):
            if not isinstance(key, (tuple, list)) or len(key) != 3:
                raise InvalidArgumentError(
                    f"conversations[{index}] must be an (origin, service_name, "
                    f"broker_instance) triple, not {key!r:.60}")
            _check_key(*key)
        return self._routing.route_many([tuple(key) for key in keys])

    def explain(
        self, service_name: str, *, broker_instance: str | None = None, origin: str
    ) -> list[ExplainStep]:
        """The routing process traced, one row per step with the candidates it saw."""
        _check_key(origin, service_name, broker_instance)
        return self._routing.explain(origin, service_name, broker_instance)

    def sql(self, query: str, params: Any = None) -> duckdb.DuckDBPyRelation:
        """Run one read-only query on the instance file (the sys.* views, route_decision()).

        Only a single SELECT (WITH ..., FROM ..., VALUES, SHOW, DESCRIBE, SUMMARIZE) is
        run; a statement that writes, attaches, copies out, sets, installs or loads raises
        InvalidArgumentError, as does a SELECT calling nextval() or setseed(). Changes go
        through the API or T-SQL (``Database.execute()``), which keep routing and the
        messaging engine in step with the file. It runs on its own cursor, so it sees what
        is committed and never disturbs the background worker or a transaction in progress
        on the instance's connection. A query DuckDB cannot run raises InvalidArgumentError
        carrying DuckDB's own explanation (the query is DuckDB's SQL)."""
        if self._closed:
            raise BrokerError("the instance is closed")
        check_read_only_query(query)
        if params is not None and not isinstance(params, (list, tuple, dict)):
            raise InvalidArgumentError(
                f"params must be a list, a tuple or a dict, not {type(params).__name__}")
        try:
            return self._store.connection.cursor().sql(query, params=params)
        except duckdb.Error as exc:
            damage = damage_reason(exc)
            if damage is not None:
                raise StorageError(damaged_message(str(self.path), damage)) from exc
            raise InvalidArgumentError(f"the query failed: {exc}") from exc
        except (TypeError, ValueError, RuntimeError, UnicodeError) as exc:
            raise InvalidArgumentError(
                f"params cannot be bound to the query: {type(exc).__name__}") from exc


class _Write:
    """One catalog write: a single transaction. The routing answers the change can alter
    are voided (a rollback voids them all, see RoutingEngine), and so is the conversations'
    catalog cache. When the outermost write commits, the voided routing keys that were in
    use are decided again, and every waiting transmission is retried at once: creating the
    missing service, adding the missing route or turning a queue ON delivers what waits
    (C3, C5, R2.7), without waiting for the back-off."""

    def __init__(self, instance: Instance, change: CatalogChange) -> None:
        self._instance = instance
        self._change = change
        self._tx = instance._store.transaction()

    def __enter__(self) -> None:
        uow = self._instance._messaging.current()
        if uow is not None:  # inside Database.transaction(): the write joins it
            uow.ensure_tx()
            uow.catalog_written = True
        self._tx.__enter__()
        self._instance._write_depth += 1

    def __exit__(self, exc_type, exc, tb) -> bool | None:
        instance = self._instance
        messaging = instance._messaging
        try:
            if isinstance(exc, duckdb.Error):
                self._tx.__exit__(exc_type, exc, tb)
                store = instance._store
                raise translate_error(exc, str(store.path or ":memory:"),
                                      read_only=store.read_only) from exc
            result = self._tx.__exit__(exc_type, exc, tb)
        except BaseException:
            messaging.forget_endpoints()  # a conversation change inside may be undone
            raise
        finally:
            instance._write_depth -= 1
            instance._routing.changed(self._change)
            messaging.catalog_changed()
        if exc is not None:
            messaging.forget_endpoints()
        elif instance._write_depth == 0:
            if not instance._store.in_transaction:
                instance._routing.redecide()
            messaging.after_catalog_write()
        return result


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

    # -- message types and contracts (C2) -------------------------------------------------

    def create_message_type(self, name: str, validation: str = "NONE") -> MessageType:
        """CREATE MESSAGE TYPE name VALIDATION = NONE | EMPTY | WELL_FORMED_XML."""
        check_name("message type", name)
        code = _validation_code(validation)
        with self._instance._write(NOTHING):
            if name in self._catalog().message_types:
                raise AlreadyExistsError(
                    f"message type {name!r} already exists in database {self.name!r}")
            self._store.run("instance/insert_message_type.sql", {
                "database_id": self.database_id, "name": name, "validation": code,
                "now": self._instance._now()})
        return MessageType(name, VALIDATION_NAMES[code])

    def alter_message_type(self, name: str, validation: str) -> MessageType:
        """ALTER MESSAGE TYPE name VALIDATION = ..."""
        check_name("message type", name)
        code = _validation_code(validation)
        with self._instance._write(NOTHING):
            self._user_message_type(name, "alter")
            self._store.run("instance/update_message_type.sql", {
                "database_id": self.database_id, "name": name, "validation": code})
        return MessageType(name, VALIDATION_NAMES[code])

    def drop_message_type(self, name: str) -> None:
        """DROP MESSAGE TYPE: refused while a contract uses it."""
        check_name("message type", name)
        with self._instance._write(NOTHING):
            self._user_message_type(name, "drop")
            users = sorted(c for c, usages in self._catalog().contracts.items()
                           if name in usages)
            if users:
                raise InUseError(
                    f"message type {name!r} is used by contract(s) {', '.join(users)} in "
                    f"database {self.name!r}; drop them first")
            self._store.run("instance/delete_message_type.sql",
                            {"database_id": self.database_id, "name": name})

    def message_types(self) -> list[MessageType]:
        catalog = self._catalog()
        return [MessageType(n, VALIDATION_NAMES[v], n in catalog.system_message_types)
                for n, v in sorted(catalog.message_types.items())]

    def create_contract(
        self, name: str, messages: Mapping[str, str] | Iterable[tuple[str, str]]
    ) -> Contract:
        """CREATE CONTRACT name (message type SENT BY INITIATOR | TARGET | ANY, ...).

        ``messages`` maps message type names to "INITIATOR", "TARGET" or "ANY" (or is a
        sequence of such pairs). SQL Server has no ALTER CONTRACT; neither has pybroker.
        """
        check_name("contract", name)
        pairs = (list(messages.items()) if isinstance(messages, Mapping)
                 else arguments.sequence("messages", messages))
        if not pairs:
            raise InvalidArgumentError(
                f"contract {name!r} needs at least one message type (SENT BY ...)")
        usages: dict[str, tuple[bool, bool]] = {}
        for pair in pairs:
            if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
                raise InvalidArgumentError(
                    f"a contract's messages are (message type, sent by) pairs, not {pair!r}")
            mtype, sent_by = pair
            check_name("message type", mtype)
            who = sent_by.upper() if isinstance(sent_by, str) else sent_by
            if who not in _SENT_BY:
                raise InvalidArgumentError(
                    f"message type {mtype!r} in contract {name!r}: SENT BY must be "
                    f"INITIATOR, TARGET or ANY, not {sent_by!r}")
            if mtype in usages:
                raise InvalidArgumentError(
                    f"message type {mtype!r} appears twice in contract {name!r}")
            if mtype.startswith(SYSTEM_PREFIX):
                raise InvalidArgumentError(
                    f"system message type {mtype!r} cannot be part of a contract (the broker "
                    "sends it on every conversation)")
            usages[mtype] = (who in ("INITIATOR", "ANY"), who in ("TARGET", "ANY"))
        with self._instance._write(NOTHING):
            catalog = self._catalog()
            if name in catalog.contracts:
                raise AlreadyExistsError(
                    f"contract {name!r} already exists in database {self.name!r}")
            for mtype in usages:
                if mtype not in catalog.message_types:
                    raise NotFoundError(
                        f"message type {mtype!r} of contract {name!r} does not exist in "
                        f"database {self.name!r}; create it first")
            self._store.run("instance/insert_contract.sql", {
                "database_id": self.database_id, "name": name, "now": self._instance._now()})
            for mtype, (by_initiator, by_target) in usages.items():
                self._store.run("instance/insert_contract_message_usage.sql", {
                    "database_id": self.database_id, "contract_name": name,
                    "message_type_name": mtype, "is_sent_by_initiator": by_initiator,
                    "is_sent_by_target": by_target})
        return self.contract(name)

    def drop_contract(self, name: str) -> None:
        """DROP CONTRACT: refused while a service accepts it."""
        check_name("contract", name)
        with self._instance._write(NOTHING):
            catalog = self._catalog()
            if name not in catalog.contracts:
                raise NotFoundError(f"contract {name!r} does not exist in database {self.name!r}")
            if name in catalog.system_contracts:
                raise InUseError(f"contract {name!r} is a system contract; it cannot be dropped")
            users = sorted(s for s, c in catalog.service_contracts.items() if name in c)
            if users:
                raise InUseError(
                    f"contract {name!r} is used by service(s) {', '.join(users)} in database "
                    f"{self.name!r}; ALTER SERVICE ... (DROP CONTRACT ...) or drop them first")
            params = {"database_id": self.database_id, "name": name}
            self._store.run("instance/delete_contract_message_usages.sql",
                            {"database_id": self.database_id, "contract_name": name})
            self._store.run("instance/delete_contract.sql", params)

    def contract(self, name: str) -> Contract:
        catalog = self._catalog()
        if name not in catalog.contracts:
            raise NotFoundError(f"contract {name!r} does not exist in database {self.name!r}")
        return _contract(name, catalog.contracts[name], name in catalog.system_contracts)

    def contracts(self) -> list[Contract]:
        catalog = self._catalog()
        return [_contract(n, u, n in catalog.system_contracts)
                for n, u in sorted(catalog.contracts.items())]

    # -- queues and services -------------------------------------------------------------

    def create_queue(
        self,
        name: str,
        status: bool = True,
        *,
        retention: bool = False,
        poison_message_handling: bool = True,
    ) -> Queue:
        """CREATE QUEUE name WITH STATUS = ON|OFF, RETENTION = ON|OFF,
        POISON_MESSAGE_HANDLING (STATUS = ON|OFF) (C3; SQL Server's defaults)."""
        check_name("queue", name)
        for what, value in (("queue status", status), ("retention", retention),
                            ("poison_message_handling", poison_message_handling)):
            if not isinstance(value, bool):
                raise BrokerError(f"{what} must be True (ON) or False (OFF), not {value!r}")
        with self._instance._write(NOTHING):  # routing reads services, not queues
            for q in self.queues():
                if q.name.lower() == name.lower():  # queue names ignore case
                    raise AlreadyExistsError(
                        f"queue {name!r} already exists in {self.name!r}"
                        + ("" if q.name == name else f" as {q.name!r} (queue names are "
                           "unique without regard to case)"))
            self._store.run(
                "instance/insert_queue.sql",
                {"database_id": self.database_id, "name": name, "status": status,
                 "retention": retention, "poison_message_handling": poison_message_handling,
                 "now": self._instance._now()},
            )
        return Queue(name, status, retention, poison_message_handling)

    def alter_queue(
        self,
        name: str,
        status: bool | None = None,
        *,
        retention: bool | None = None,
        poison_message_handling: bool | None = None,
    ) -> Queue:
        """ALTER QUEUE: None leaves a setting as it is. Turning a queue ON delivers the
        messages that wait for it in transmission queues, in order (C3, P8)."""
        check_name("queue", name)
        for what, value in (("queue status", status), ("retention", retention),
                            ("poison_message_handling", poison_message_handling)):
            if value is not None and not isinstance(value, bool):
                raise BrokerError(f"{what} must be True (ON), False (OFF) or None, not {value!r}")
        with self._instance._write(NOTHING):
            current = {q.name: q for q in self.queues()}.get(name)
            if current is None:
                raise NotFoundError(f"queue {name!r} does not exist in database {self.name!r}")
            merged = Queue(
                name,
                current.status if status is None else status,
                current.retention if retention is None else retention,
                current.poison_message_handling if poison_message_handling is None
                else poison_message_handling,
            )
            self._store.run("instance/update_queue.sql", {
                "database_id": self.database_id, "name": name, "status": merged.status,
                "retention": merged.retention,
                "poison_message_handling": merged.poison_message_handling})
        return merged

    def drop_queue(self, name: str) -> None:
        """DROP QUEUE: refused while a service is bound to it; its messages go with it."""
        check_name("queue", name)
        with self._instance._write(NOTHING):
            if not any(q.name == name for q in self.queues()):
                raise NotFoundError(f"queue {name!r} does not exist in database {self.name!r}")
            users = sorted(s.name for s in self.services() if s.queue == name)
            if users:
                raise InUseError(
                    f"queue {name!r} is used by service(s) {', '.join(users)} in database "
                    f"{self.name!r}; drop them or move them (ALTER SERVICE ... ON QUEUE) first")
            params = {"database_id": self.database_id, "name": name}
            self._store.run("instance/delete_queue_messages.sql",
                            {"database_id": self.database_id, "queue_name": name})
            self._store.run("instance/delete_queue.sql", params)

    def queues(self) -> list[Queue]:
        rows = self._store.run("instance/select_queue_settings.sql",
                               {"database_id": self.database_id})
        return [Queue(n, bool(s), bool(r), p is None or bool(p)) for n, s, r, p in rows]

    def create_service(
        self, name: str, queue: str, contracts: Iterable[str] | None = None
    ) -> Service:
        """CREATE SERVICE name ON QUEUE queue [(contract, ...)]. A service that lists no
        contracts can only initiate conversations; ``contracts=["DEFAULT"]`` accepts the
        default contract (as in SQL Server)."""
        check_name("service", name, MAX_VALUE_LENGTH)
        check_name("queue", queue)
        wanted = _contract_list(contracts)
        with self._instance._write(CatalogChange(services=frozenset([name]))):  # R2.6, R4
            if not any(q.name == queue for q in self.queues()):
                raise NotFoundError(
                    f"queue {queue!r} does not exist in database {self.name!r}; create it first"
                )
            if any(s.name == name for s in self.services()):
                raise AlreadyExistsError(f"service {name!r} already exists in {self.name!r}")
            self._check_contracts_exist(wanted)
            self._store.run(
                "instance/insert_service.sql",
                {"database_id": self.database_id, "name": name, "queue_name": queue,
                 "now": self._instance._now()},
            )
            for contract in wanted:
                self._store.run("instance/insert_service_contract_usage.sql", {
                    "database_id": self.database_id, "service_name": name,
                    "contract_name": contract})
        return Service(name, queue, tuple(sorted(wanted)))

    def alter_service(
        self,
        name: str,
        queue: str | None = None,
        *,
        add_contracts: Iterable[str] = (),
        drop_contracts: Iterable[str] = (),
    ) -> Service:
        """ALTER SERVICE name [ON QUEUE queue] [(ADD CONTRACT c, DROP CONTRACT c, ...)]."""
        check_name("service", name, MAX_VALUE_LENGTH)
        adding = _contract_list(add_contracts)
        dropping = _contract_list(drop_contracts)
        if set(adding) & set(dropping):
            raise InvalidArgumentError(
                f"ALTER SERVICE {name!r} both adds and drops {sorted(set(adding) & set(dropping))}")
        with self._instance._write(NOTHING):  # routing reads service names only
            current = {s.name: s for s in self.services()}.get(name)
            if current is None:
                raise NotFoundError(f"service {name!r} does not exist in database {self.name!r}")
            if queue is not None:
                check_name("queue", queue)
                if not any(q.name == queue for q in self.queues()):
                    raise NotFoundError(
                        f"queue {queue!r} does not exist in database {self.name!r}")
                self._store.run("instance/update_service_queue.sql", {
                    "database_id": self.database_id, "name": name, "queue_name": queue})
            self._check_contracts_exist(adding)
            for contract in adding:
                if contract in current.contracts:
                    raise AlreadyExistsError(
                        f"service {name!r} already accepts contract {contract!r}")
                self._store.run("instance/insert_service_contract_usage.sql", {
                    "database_id": self.database_id, "service_name": name,
                    "contract_name": contract})
            for contract in dropping:
                if contract not in current.contracts:
                    raise NotFoundError(
                        f"service {name!r} does not accept contract {contract!r}")
                self._store.run("instance/delete_service_contract_usage.sql", {
                    "database_id": self.database_id, "service_name": name,
                    "contract_name": contract})
        return {s.name: s for s in self.services()}[name]

    def drop_service(self, name: str) -> None:
        """DROP SERVICE: its conversations end at once (their far sides in this instance
        get error -8490, C2), then the service goes."""
        check_name("service", name, MAX_VALUE_LENGTH)
        with self._instance._write(CatalogChange(services=frozenset([name]))):  # R2.6, R4
            if not any(s.name == name for s in self.services()):
                raise NotFoundError(f"service {name!r} does not exist in database {self.name!r}")
            self._instance._messaging.end_service_conversations(self, name)
            params = {"database_id": self.database_id, "service_name": name}
            self._store.run("instance/delete_service_contract_usages.sql", params)
            self._store.run("instance/delete_service.sql",
                            {"database_id": self.database_id, "name": name})

    def services(self) -> list[Service]:
        rows = self._store.run("instance/select_services.sql", {"database_id": self.database_id})
        usages = self._store.run("instance/select_service_contract_usages.sql",
                                 {"database_id": self.database_id})
        accepted: dict[str, list[str]] = {}
        for service, contract in usages:
            accepted.setdefault(service, []).append(contract)
        return [Service(n, q, tuple(sorted(accepted.get(n, ())))) for n, q in rows]

    # -- conversations (C1-C5, P3) -----------------------------------------------------------

    def begin_dialog(
        self,
        from_service: str,
        to_service: str,
        *,
        contract: str = "DEFAULT",
        broker_instance: str | None = None,
        lifetime: int | None = None,
        related_conversation_group: str | None = None,
    ) -> Conversation:
        """BEGIN DIALOG: a conversation from ``from_service`` (of this database) to
        ``to_service``, routed with this database's routing table at the first send (R1.1).
        ``lifetime`` in seconds (default 2^31, C1)."""
        handle = self._instance._messaging.begin_dialog(
            self, from_service, to_service, contract, broker_instance, lifetime,
            related_conversation_group)
        return Conversation(self, handle)

    def conversation(self, handle: str) -> Conversation:
        """The conversation endpoint of this database with that handle (e.g. to reply on a
        received message's ``conversation_handle``)."""
        arguments.text("handle", handle, limit=64)
        ep = self._instance._messaging.endpoint(handle, self.database_id)
        return Conversation(self, ep.conversation_handle)

    def receive(
        self, queue: str, *, max_messages: int = 1, timeout: float = 0.0
    ) -> list[Message]:
        """RECEIVE TOP (max_messages) FROM queue, waiting up to ``timeout`` seconds for the
        first message (WAITFOR). Returns messages of one conversation group, in order; they
        leave the queue when the transaction commits (C3)."""
        arguments.whole_number("max_messages", max_messages, minimum=1,
                               maximum=arguments.INT32_MAX)
        arguments.real_number("timeout", timeout, minimum=0.0, maximum=arguments.MAX_SECONDS)
        return self._instance._messaging.receive(self, queue, max_messages, timeout)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Database]:
        """One transaction for every send, receive, begin_dialog and end inside: all commit
        together or roll back together (a rolled-back receive puts its messages back)."""
        with self._instance._messaging.unit_of_work():
            yield self

    # -- internals (conversations) ---------------------------------------------------------

    def _catalog(self):
        return self._instance._messaging.catalog(self.database_id)

    def _user_message_type(self, name: str, verb: str) -> None:
        catalog = self._catalog()
        if name not in catalog.message_types:
            raise NotFoundError(f"message type {name!r} does not exist in database {self.name!r}")
        if name in catalog.system_message_types:
            raise InUseError(f"message type {name!r} is a system message type; it cannot be "
                             f"{verb}ped" if verb == "drop" else
                             f"message type {name!r} is a system message type; it cannot be "
                             f"{verb}ed")

    def _check_contracts_exist(self, contracts: list[str]) -> None:
        catalog = self._catalog()
        for contract in contracts:
            if contract not in catalog.contracts:
                raise NotFoundError(
                    f"contract {contract!r} does not exist in database {self.name!r}; "
                    "create it first")

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
            rows = self._store.run("instance/select_route_name_any_case.sql", {
                "database_id": self.database_id, "name": definition.name})
            if rows:
                same = rows[0][0] == definition.name
                raise RouteDefinitionError(
                    f"route {definition.name!r} already exists in database {self.name!r}"
                    + ("" if same else f" as {rows[0][0]!r}")
                    + " (route names are unique per database"
                    + (")" if same else ", without regard to case)"),
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
        """Run T-SQL DDL: CREATE/ALTER/DROP ROUTE (R10), MESSAGE TYPE, CONTRACT, QUEUE and
        SERVICE (C2, C3); on master also CREATE/ALTER/DROP ENDPOINT and CREATE/DROP
        CERTIFICATE (P2, pybroker.tsql.endpoint_ddl). A batch of several statements is all
        or nothing."""
        from pybroker.tsql import parse_batch

        if not isinstance(tsql, str):
            raise BrokerError(f"execute() takes T-SQL text, not {type(tsql).__name__}")
        self.run_statements(parse_batch(tsql, master=self.database_id == MASTER_DATABASE_ID))

    def run_statements(self, statements: Iterable[object]) -> None:
        """Run parsed statements (pybroker.tsql) in one transaction: any error, nothing
        changed (an endpoint a failed batch closed is started again)."""
        from pybroker.tsql import AlterRoute, CreateRoute, DropRoute
        from pybroker.tsql import object_ddl as ddl

        statements = list(statements)
        server = ServerBatch(self, statements)  # ENDPOINT and CERTIFICATE, on master only
        with server, self._instance._write(NOTHING):  # each statement says what it changes
            for statement in statements:
                if isinstance(statement, SERVER_STATEMENTS):
                    server.run(statement)
                elif isinstance(statement, CreateRoute):
                    self.create_route(
                        statement.name, service_name=statement.service_name,
                        broker_instance=statement.broker_instance, address=statement.address,
                        mirror_address=statement.mirror_address, lifetime=statement.lifetime,
                    )
                elif isinstance(statement, AlterRoute):
                    self.alter_route(statement.name, **dict(statement.changes))
                elif isinstance(statement, DropRoute):
                    self.drop_route(statement.name)
                elif isinstance(statement, ddl.CreateMessageType):
                    self.create_message_type(statement.name, statement.validation)
                elif isinstance(statement, ddl.AlterMessageType):
                    self.alter_message_type(statement.name, statement.validation)
                elif isinstance(statement, ddl.DropMessageType):
                    self.drop_message_type(statement.name)
                elif isinstance(statement, ddl.CreateContract):
                    self.create_contract(statement.name, statement.messages)
                elif isinstance(statement, ddl.DropContract):
                    self.drop_contract(statement.name)
                elif isinstance(statement, ddl.CreateQueue):
                    self.create_queue(
                        statement.name, statement.status, retention=statement.retention,
                        poison_message_handling=statement.poison_message_handling)
                elif isinstance(statement, ddl.AlterQueue):
                    self.alter_queue(
                        statement.name, statement.status, retention=statement.retention,
                        poison_message_handling=statement.poison_message_handling)
                elif isinstance(statement, ddl.DropQueue):
                    self.drop_queue(statement.name)
                elif isinstance(statement, ddl.CreateService):
                    self.create_service(statement.name, statement.queue, statement.contracts)
                elif isinstance(statement, ddl.AlterService):
                    self.alter_service(
                        statement.name, statement.queue, add_contracts=statement.add_contracts,
                        drop_contracts=statement.drop_contracts)
                elif isinstance(statement, ddl.DropService):
                    self.drop_service(statement.name)
                else:
                    raise BrokerError(f"execute() cannot run {statement!r}")
            server.finish()

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


def _check_key(origin: object, service_name: object, broker_instance: object) -> None:
    """The arguments of a routing decision, checked (the routing engine assumes them)."""
    arguments.text("origin", origin, limit=MAX_VALUE_LENGTH)
    check_name("service", service_name, MAX_VALUE_LENGTH)
    if broker_instance is not None:
        normalize_guid(broker_instance)


def _did_you_mean(name: str, names: Iterable[str]) -> str:
    """A hint when a name differs from an existing one only in case."""
    for candidate in names:
        if candidate.lower() == name.lower() and candidate != name:
            return f"; did you mean {candidate!r}? (names are used as they were created)"
    return ""


def _validation_code(validation: object) -> str:
    if isinstance(validation, str) and validation.upper() in VALIDATION_CODES:
        return VALIDATION_CODES[validation.upper()]
    raise InvalidArgumentError(
        f"VALIDATION must be NONE, EMPTY or WELL_FORMED_XML, not {validation!r}")


def _contract_list(contracts: Iterable[str] | None) -> list[str]:
    if contracts is None:
        return []
    if isinstance(contracts, str):
        raise InvalidArgumentError(
            f"contracts is a list of contract names, not the string {contracts!r}")
    names = arguments.sequence("contracts", contracts)
    for name in names:
        check_name("contract", name)
    if len(set(names)) != len(names):
        raise InvalidArgumentError(f"a contract is named twice: {names}")
    return names


def _contract(name: str, usages: dict[str, tuple[bool, bool]], is_system: bool) -> Contract:
    def who(by_initiator: bool, by_target: bool) -> str:
        return "ANY" if by_initiator and by_target else (
            "INITIATOR" if by_initiator else "TARGET")

    return Contract(name, tuple((t, who(*u)) for t, u in sorted(usages.items())), is_system)
