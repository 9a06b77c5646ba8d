"""The public API: an Instance (one DuckDB file) holding Databases, their queues, services
and routes, and the routing decisions made over them. Both are fronts over the instance's
kernel (pybroker.kernel) and the services composed on it; the rows a Database hands out
are in kernel/catalog_objects.py.
"""

from __future__ import annotations

import contextlib
import difflib
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import duckdb

from pybroker import arguments
from pybroker.api.conversation import Conversation
from pybroker.api.database_script import InstanceDatabases
from pybroker.arguments import check_read_only_query
from pybroker.core.activation.monitor import DEFAULT_INTERVAL
from pybroker.core.conversation.model import Message
from pybroker.core.routing.cache import NOTHING, CatalogChange
from pybroker.core.routing.decision import RouteDecision
from pybroker.core.routing.definition import check_name, normalize_guid
from pybroker.core.routing.engine import OUTSIDE, ExplainStep
from pybroker.core.tsql import conversation_parser
from pybroker.core.tsql.batch_interface import BatchResults
from pybroker.core.tsql.priority_ddl import PriorityStatement
from pybroker.core.tsql.script import run_batches
from pybroker.core.tsql.statement_handlers import StatementRunner
from pybroker.errors import (
    AlreadyExistsError,
    BrokerError,
    InstanceClosedError,
    InvalidArgumentError,
    NotFoundError,
    StorageError,
)
from pybroker.kernel.activation import DEFAULT_CLOSE_TIMEOUT, ActivationRunner
from pybroker.kernel.broker_endpoint.ddl import MASTER_DATABASE_ID, ServerBatch
from pybroker.kernel.broker_endpoint.runtime import BrokerEndpoint
from pybroker.kernel.broker_endpoints import BrokerEndpoints
from pybroker.kernel.broker_priorities import BrokerPriorities
from pybroker.kernel.catalog_ddl import CatalogDDL
from pybroker.kernel.catalog_objects import Contract, MessageType, Queue, Route, Service
from pybroker.kernel.kernel import Kernel, check_route_key
from pybroker.kernel.live_views import names_broker_events, names_live_view
from pybroker.kernel.messaging.endpoint_cache import DEFAULT_ENDPOINT_CACHE
from pybroker.kernel.mirroring import Mirroring
from pybroker.kernel.procedures import Procedure, Procedures
from pybroker.kernel.route_ddl import RouteDDL
from pybroker.kernel.user_sql import DatabaseSql, UserSql
from pybroker.storage import no_pandas
from pybroker.storage.duckdb_errors import damage_reason, damaged_message, query_failed
from pybroker.storage.snapshot import write_snapshot

CLOSE_TIMEOUT = 5.0  # seconds Instance.close() waits for other threads' transactions


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
        memory_limit: str | None = None,
        threads: int | None = None,
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

        self.kernel = Kernel(path, clock=clock or time.time,
                             disable_queue=self._disable_queue, retry_scale=retry_scale,
                             worker=worker, endpoint_cache=endpoint_cache,
                             read_only=read_only, memory_limit=memory_limit, threads=threads)
        # the services composed on the kernel, which the Databases call
        self.catalog_ddl = CatalogDDL(self.kernel)
        self.procedures = Procedures(self.kernel)
        self.user_sql = UserSql(self.kernel)
        self.route_ddl = RouteDDL(self.kernel)
        self.mirroring = Mirroring(self.kernel)
        self.broker_endpoints = BrokerEndpoints(self.kernel)
        self._on_close: list[Callable[[], None]] = []

    # -- lifecycle -----------------------------------------------------------------------

    @property
    def path(self) -> Path | None:
        return self.kernel.store.path

    def on_close(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` first when the instance closes (a client server stops
        before the file does)."""
        self._on_close.append(callback)

    def watch_broker_events(
        self, callback: Callable[[str, str, str | None, str], None] | None
    ) -> None:
        """Call ``callback(event_class, subclass, peer_address, description)`` for each
        broker event as it is recorded, from the thread that records it (``None`` stops;
        a callback that raises is ignored): ``pybroker serve`` logs connections with it."""
        self.kernel.messaging.remote.event_listener = callback

    def close(self, timeout: float = CLOSE_TIMEOUT) -> None:
        """Close the instance: stop its broker endpoint and worker, end every RECEIVE that
        waits for messages, and close the file once the transactions other threads have
        open end, waiting ``timeout`` seconds (default 5) at most. A transaction still open
        then is rolled back: nothing of it is written (a message it received is back in its
        queue), and the thread that runs it gets InstanceClosedError, as does every call
        made during or after close(). Calling close() again does nothing.

        Activation (start_activation) stops first among them: no reader starts from then
        on, the ones whose RECEIVE waits see it end, and the running ones get the
        ``close_timeout`` start_activation was given to return before they are abandoned."""
        arguments.real_number("timeout", timeout, minimum=0.0, maximum=arguments.MAX_SECONDS)
        if self.kernel.closed:
            return
        callbacks, self._on_close = self._on_close, []
        for callback in reversed(callbacks):  # a client server stops while the file is open
            callback()
        self.kernel.close(timeout)

    def __enter__(self) -> Instance:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def read_only(self) -> bool:
        """Whether the instance file was opened with ``read_only=True``."""
        return self.kernel.store.read_only

    def _database_by_id(self, database_id: int) -> Database:
        return Database(self, *self.kernel.database(database_id))

    def _disable_queue(self, database_id: int, queue: str) -> None:
        """C3: poison message handling turns the queue OFF, as ALTER QUEUE would (the
        messaging engine calls this; it is given the method, not the instance)."""
        self._database_by_id(database_id).alter_queue(queue, status=False)

    # -- the broker endpoint (P2; kernel/broker_endpoints.py) ---------------------------

    def start_endpoint(
        self,
        port: int | None = None,
        host: str | None = None,
        *,
        idle_timeout: float | None = None,
        fragment_size: int | None = None,
        connect_timeout: float | None = None,
        handshake_timeout: float | None = None,
        max_connections: int | None = None,
        encryption: bool | None = None,
        probe_timeout: float | None = None,
    ) -> BrokerEndpoint:
        """Listen for adjacent brokers on ``host:port`` (``port=0``: a free port) and send
        the messages whose route names a network address. Mutual TLS with this instance's
        certificate; only peers admitted with ``trust()`` can connect, either way.
        ``idle_timeout`` (default 90 s) closes a connection nothing flowed on;
        ``fragment_size`` (default 1 MiB) is the largest fragment a message travels in.
        ``encryption=False`` (SQL Server's ENCRYPTION = DISABLED) speaks without TLS: peers
        still must be trusted, and every dialog frame is still signed (P6).
        ``probe_timeout`` (default 10 s) is how long a mirrored route waits for a partner's
        answer to its PROBE before it counts that partner as unreachable (R9.2-R9.4).

        If the instance file defines the broker endpoint (CREATE ENDPOINT on master), what
        is left out comes from its definition (LISTENER_PORT, LISTENER_IP, ENCRYPTION),
        whatever its STATE, since this call is what starts it; what is given overrides the
        definition for this endpoint only. The endpoint started is then the definition's:
        ALTER and DROP ENDPOINT stop or move it. With no definition the defaults are port
        4022, host 127.0.0.1 and encryption on."""
        return self.broker_endpoints.start_endpoint(
            port, host, idle_timeout=idle_timeout, fragment_size=fragment_size,
            connect_timeout=connect_timeout, handshake_timeout=handshake_timeout,
            max_connections=max_connections, encryption=encryption,
            probe_timeout=probe_timeout)

    @property
    def endpoint(self) -> BrokerEndpoint | None:
        """The running broker endpoint, if started."""
        endpoint = self.kernel.endpoint
        return endpoint if isinstance(endpoint, BrokerEndpoint) else None

    @property
    def certificate(self) -> str:
        """This instance's endpoint certificate (PEM), made on first need; its private
        key stays in the instance file."""
        return self.broker_endpoints.certificate()

    def trust(self, name: str, pem: str) -> None:
        """Admit the peer instance whose endpoint certificate is ``pem`` as ``name``
        (replacing a certificate of that name)."""
        self.broker_endpoints.trust(name, pem)

    def untrust(self, name: str) -> None:
        """Stop admitting the peer ``name``; its connections are closed."""
        self.broker_endpoints.untrust(name)

    # -- activation (C3, pybroker.core.activation) ------------------------------------------

    def start_activation(
        self,
        *,
        check_interval: float = DEFAULT_INTERVAL,
        close_timeout: float = DEFAULT_CLOSE_TIMEOUT,
    ) -> None:
        """Run internal activation in this process: a queue monitor for every queue with
        ACTIVATION ON starts a reader (a thread calling the queue's callable with its
        Database) when messages arrive and none runs, and while messages keep arriving
        faster than the readers take them, one more at most every ``check_interval``
        seconds, up to MAX_QUEUE_READERS. A reader that returns is started again only
        when messages arrive (or a check finds the queue holding some).

        ``pybroker serve`` calls this; an embedding application calls it once after
        ``connect()``. ``close()`` stops it: it waits ``close_timeout`` seconds in all for
        running readers to return, then abandons them (daemon threads; see
        pybroker.kernel.activation). A reader that raises is recorded in
        sys.broker_events; sys.dm_broker_queue_monitors and sys.dm_broker_activated_tasks
        show the monitors and running readers."""
        kernel = self.kernel
        kernel.check_open()
        arguments.real_number("check_interval", check_interval, minimum=0.001, maximum=3600.0)
        arguments.real_number("close_timeout", close_timeout, minimum=0.0, maximum=3600.0)
        kernel.store.check_writable()
        if kernel.activation is not None:
            raise BrokerError("activation is already running in this instance; it runs "
                              "once per instance (stop_activation() first)")
        kernel.activation = ActivationRunner(
            kernel.store, kernel.messaging, kernel.clock, self._database_by_id,
            check_interval=check_interval, close_timeout=close_timeout)
        kernel.activation.start()

    def stop_activation(self) -> int:
        """Stop activation (started readers get its ``close_timeout`` to return). Returns
        how many readers were still running and are abandoned; 0 when none was running."""
        return self.kernel.stop_activation()

    def run_pending_all(self) -> None:
        """Retry every waiting transmission now (a transport or route appeared)."""
        self.kernel.run_pending_all()

    # -- the delay/retry loop ------------------------------------------------------------

    def run_pending(self, now: float | None = None) -> int:
        """Run the delay/retry loop once at ``now`` (epoch seconds; default the clock):
        expire conversation lifetimes (C2: error -8489), fire conversation timers
        (DialogTimer), retry waiting transmissions whose back-off has passed (C5).
        The background worker calls this when something is due; tests call it with their
        clock. Returns how many conversation endpoints it acted on."""
        self.kernel.check_open()
        if now is not None:
            arguments.now(now)
        self.kernel.store.check_writable()
        return self.kernel.messaging.run_pending(now)

    @property
    def max_message_size(self) -> int:
        """The largest message body SEND accepts, in bytes (default 2,147,483,647)."""
        return self.kernel.messaging.max_message_size

    @max_message_size.setter
    def max_message_size(self, size: int) -> None:
        arguments.whole_number("max_message_size", size, minimum=1,
                               maximum=arguments.INT64_MAX)
        with self.kernel.write(NOTHING):
            self.kernel.store.run("instance/update_max_message_size.sql", {"size": size})

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
        with self.kernel.write():
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
            now = self.kernel.now()
            database_id = self.kernel.store.run(
                "instance/insert_database.sql",
                {"name": name, "service_broker_guid": guid, "now": now},
            )[0][0]
            self.kernel.store.run(
                "instance/insert_route.sql",
                {
                    "database_id": database_id, "name": "AutoCreatedLocal",
                    "remote_service_name": None, "broker_instance": None, "lifetime": None,
                    "address": "LOCAL", "mirror_address": None, "now": now,
                },
            )
            system = {"database_id": database_id, "now": now}
            self.kernel.store.run("conversation/insert_system_message_types.sql", system)  # C2
            self.kernel.store.run("conversation/insert_system_contracts.sql", system)
            self.kernel.store.run("conversation/insert_system_contract_message_usages.sql",
                            {"database_id": database_id})
        return Database(self, database_id, name, guid)

    def execute(self, tsql: str) -> BatchResults:
        """Run a T-SQL script that begins in master, as a login's session does: USE
        switches the database for what follows (Database.execute says the rest)."""
        return self.database("master").execute(tsql)

    def drop_database(self, name: str) -> None:
        """DROP DATABASE: the database and all it holds (pybroker.api.database_script)."""
        InstanceDatabases(self).drop_database(check_name("database", name))

    def database(self, name: str) -> Database:
        check_name("database", name)
        rows = self.kernel.store.run("instance/select_database.sql", {"name": name})
        if not rows:
            raise NotFoundError(f"database {name!r} does not exist in this instance"
                                + _did_you_mean(name, [d.name for d in self.databases()]))
        database_id, db_name, guid = rows[0]
        return Database(self, database_id, db_name, guid)

    def databases(self) -> list[Database]:
        return [Database(self, *key) for key in self.kernel.databases()]

    # -- settings ------------------------------------------------------------------------

    @property
    def forwarding(self) -> bool:
        """R7.3: whether messages from outside may be forwarded (off by default)."""
        return bool(self.kernel.store.run("instance/select_settings.sql")[0][0])

    @forwarding.setter
    def forwarding(self, enabled: bool) -> None:
        if not isinstance(enabled, bool):
            raise BrokerError(f"forwarding must be True or False, not {enabled!r}")
        with self.kernel.write(CatalogChange(forwarding=True)):  # R3.6
            self.kernel.store.run("instance/update_forwarding.sql", {"enabled": enabled})

    @property
    def forwarding_size_mb(self) -> int:
        """R7.3: the memory bound for messages being forwarded, in MB (default 10)."""
        return int(self.kernel.store.run("instance/select_settings.sql")[0][1])

    @forwarding_size_mb.setter
    def forwarding_size_mb(self, size_mb: int) -> None:
        arguments.whole_number("forwarding_size_mb", size_mb, minimum=1,
                               maximum=arguments.INT32_MAX)
        with self.kernel.write(NOTHING):  # routing does not read the bound
            self.kernel.store.run("instance/update_forwarding_size.sql", {"size_mb": size_mb})

    # -- routing -------------------------------------------------------------------------

    def route(
        self, service_name: str, *, broker_instance: str | None = None, origin: str
    ) -> RouteDecision:
        """Decide where a conversation goes (SPEC R1-R4).

        ``origin`` is the database the conversation was begun in, or ``"outside"`` for a
        message that arrived from outside the instance (routed with msdb's table, R1.2).
        """
        return self.kernel.route(service_name, broker_instance=broker_instance, origin=origin)

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
            check_route_key(*key)
        return self.kernel.routing.route_many([tuple(key) for key in keys])

    def explain(
        self, service_name: str, *, broker_instance: str | None = None, origin: str
    ) -> list[ExplainStep]:
        """The routing process traced, one row per step with the candidates it saw."""
        check_route_key(origin, service_name, broker_instance)
        return self.kernel.routing.explain(origin, service_name, broker_instance)

    def sql(self, query: str, params: Any = None) -> duckdb.DuckDBPyRelation:
        """Run one read-only query on the instance file (the sys.* views, route_decision()).

        Only a single SELECT (WITH ..., FROM ..., VALUES, SHOW, DESCRIBE, SUMMARIZE) is
        run; a statement that writes, attaches, copies out, sets, installs or loads raises
        InvalidArgumentError, as does a SELECT calling nextval(), setseed(), checkpoint() or
        another function that changes state (arguments.py lists them). Changes go
        through the API or T-SQL (``Database.execute()``), which keep routing and the
        messaging engine in step with the file. It runs on its own cursor, so it sees what
        is committed and never disturbs the background worker or a transaction in progress
        on the instance's connection. A query DuckDB cannot run raises InvalidArgumentError
        carrying DuckDB's own explanation (the query is DuckDB's SQL)."""
        kernel = self.kernel
        kernel.check_open()
        check_read_only_query(query)
        if params is not None and not isinstance(params, (list, tuple, dict)):
            raise InvalidArgumentError(
                f"params must be a list, a tuple or a dict, not {type(params).__name__}")
        if names_live_view(query):  # what the process holds, as of now (kernel/live_views.py)
            kernel.live.refresh()
        if names_broker_events(query):
            kernel.write_events()
        try:
            return no_pandas.call(kernel.store.connection.cursor().sql, query, params=params)
        except duckdb.Error as exc:
            if kernel.store.closed:  # closed by another thread meanwhile
                raise InstanceClosedError() from exc
            damage = damage_reason(exc)
            if damage is not None:
                raise StorageError(damaged_message(str(self.path), damage)) from exc
            raise InvalidArgumentError(query_failed(exc, query, self._sys_view_names)) \
                from exc
        except (TypeError, ValueError, RuntimeError, UnicodeError) as exc:
            raise InvalidArgumentError(
                f"params cannot be bound to the query: {type(exc).__name__}") from exc

    def _sys_view_names(self) -> list[str]:
        return [row[0] for row in self.kernel.store.query("instance/select_sys_view_names.sql")[1]]

    def snapshot(self, path: str | Path, *, overwrite: bool = False) -> Path:
        """Write a point-in-time copy of the instance to the new DuckDB file ``path``.

        The copy holds every table, ``sys.*`` view and macro as committed at one moment
        (one transaction reads them all), so DuckDB's own CLI opens it while this process
        still holds the instance file: ``duckdb -readonly OUT.duckdb``. It is as fresh as
        the moment it was taken and never changes after; take another to see later changes.
        An existing ``path`` is refused unless ``overwrite=True``. Returns the path written
        (pybroker.storage.snapshot)."""
        if self.kernel.closed:
            raise BrokerError("the instance is closed")
        arguments.flag("overwrite", overwrite)
        self.kernel.live.refresh()
        return write_snapshot(self.kernel.store, path, overwrite=overwrite)


class Database:
    """A database of the instance: its own broker identifier, routing table and services.
    Its methods run on the instance's kernel and the services composed on it."""

    def __init__(self, instance: Instance, database_id: int, name: str, broker_instance: str):
        self._instance = instance
        self.database_id = database_id
        self.name = name
        self.broker_instance = broker_instance

    @property
    def instance(self) -> Instance:
        """The instance this database belongs to."""
        return self._instance

    @property
    def kernel(self) -> Kernel:
        """The kernel of the instance this database belongs to."""
        return self._instance.kernel

    def __repr__(self) -> str:
        return f"Database(name={self.name!r}, broker_instance={self.broker_instance!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Database) and other.database_id == self.database_id and (
            other._instance is self._instance
        )

    def __hash__(self) -> int:
        return hash((id(self._instance), self.database_id))

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
        handle = self.kernel.messaging.begin_dialog(
            self.database_id, from_service, to_service, contract, broker_instance, lifetime,
            related_conversation_group)
        return Conversation(self, handle)

    def conversation(self, handle: str) -> Conversation:
        """The conversation endpoint of this database with that handle (e.g. to reply on a
        received message's ``conversation_handle``)."""
        arguments.text("handle", handle, limit=64)
        ep = self.kernel.messaging.endpoint(handle, self.database_id)
        return Conversation(self, ep.conversation_handle)

    def receive(
        self,
        queue: str,
        *,
        max_messages: int = 1,
        timeout: float = 0.0,
        conversation_handle: str | None = None,
        conversation_group_id: str | None = None,
    ) -> list[Message]:
        """RECEIVE TOP (max_messages) FROM queue, waiting up to ``timeout`` seconds for the
        first message (WAITFOR). Returns messages of one conversation group, in order; they
        leave the queue when the transaction commits (C3). ``conversation_handle`` or
        ``conversation_group_id`` (not both) is RECEIVE's WHERE clause: only that
        conversation's or group's messages."""
        arguments.whole_number("max_messages", max_messages, minimum=1,
                               maximum=arguments.INT32_MAX)
        arguments.real_number("timeout", timeout, minimum=0.0, maximum=arguments.MAX_SECONDS)
        return self.kernel.messaging.receive(
            self.database_id, queue, max_messages, timeout, conversation_handle,
            conversation_group_id)

    def get_conversation_group(self, queue: str, *, timeout: float = 0.0) -> str | None:
        """GET CONVERSATION GROUP FROM queue: the conversation group the next RECEIVE takes,
        waiting up to ``timeout`` seconds for a message (WAITFOR); None when none is ready."""
        arguments.real_number("timeout", timeout, minimum=0.0, maximum=arguments.MAX_SECONDS)
        return self.kernel.messaging.get_conversation_group(self.database_id, queue,
                                                                timeout)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Database]:
        """One transaction for every send, receive, begin_dialog and end inside: all commit
        together or roll back together (a rolled-back receive puts its messages back)."""
        with self.kernel.messaging.unit_of_work():
            yield self

    # -- message types, contracts, queues and services (C2, C3; kernel/catalog_ddl.py) ----

    def create_message_type(self, name: str, validation: str = "NONE") -> MessageType:
        """CREATE MESSAGE TYPE name VALIDATION = NONE | EMPTY | WELL_FORMED_XML."""
        return self.instance.catalog_ddl.create_message_type(self, name, validation)

    def alter_message_type(self, name: str, validation: str) -> MessageType:
        """ALTER MESSAGE TYPE name VALIDATION = ..."""
        return self.instance.catalog_ddl.alter_message_type(self, name, validation)

    def drop_message_type(self, name: str) -> None:
        """DROP MESSAGE TYPE: refused while a contract uses it."""
        return self.instance.catalog_ddl.drop_message_type(self, name)

    def message_types(self) -> list[MessageType]:
        return self.instance.catalog_ddl.message_types(self)

    def create_contract(
        self, name: str, messages: Mapping[str, str] | Iterable[tuple[str, str]]
    ) -> Contract:
        """CREATE CONTRACT name (message type SENT BY INITIATOR | TARGET | ANY, ...).

        ``messages`` maps message type names to "INITIATOR", "TARGET" or "ANY" (or is a
        sequence of such pairs). SQL Server has no ALTER CONTRACT; neither has pybroker.
        """
        return self.instance.catalog_ddl.create_contract(self, name, messages)

    def drop_contract(self, name: str) -> None:
        """DROP CONTRACT: refused while a service accepts it."""
        return self.instance.catalog_ddl.drop_contract(self, name)

    def contract(self, name: str) -> Contract:
        return self.instance.catalog_ddl.contract(self, name)

    def contracts(self) -> list[Contract]:
        return self.instance.catalog_ddl.contracts(self)

    def create_queue(
        self,
        name: str,
        status: bool = True,
        *,
        retention: bool = False,
        poison_message_handling: bool = True,
        activation_procedure: str | None = None,
        activation_status: bool | None = None,
        max_queue_readers: int | None = None,
        execute_as: str | None = None,
    ) -> Queue:
        """CREATE QUEUE name WITH STATUS = ON|OFF, RETENTION = ON|OFF,
        POISON_MESSAGE_HANDLING (STATUS = ON|OFF), ACTIVATION (...) (C3; SQL Server's
        defaults).

        ``activation_procedure`` ('module.path:function') gives the queue ACTIVATION:
        ``activation_status`` (default True: ON), ``max_queue_readers`` (0 to 32767,
        default 1) and ``execute_as`` ('SELF', the default, or 'OWNER') go with it. Only the
        name's form is checked here; it is imported when a reader first starts (see
        pybroker.core.activation.procedure for the callable's signature)."""
        return self.instance.catalog_ddl.create_queue(self, name, status, retention=retention,
                                                      poison_message_handling=poison_message_handling,
                                                      activation_procedure=activation_procedure,
                                                      activation_status=activation_status,
                                                      max_queue_readers=max_queue_readers,
                                                      execute_as=execute_as)

    def alter_queue(
        self,
        name: str,
        status: bool | None = None,
        *,
        retention: bool | None = None,
        poison_message_handling: bool | None = None,
        activation_procedure: str | None = None,
        activation_status: bool | None = None,
        max_queue_readers: int | None = None,
        execute_as: str | None = None,
        drop_activation: bool = False,
    ) -> Queue:
        """ALTER QUEUE: None leaves a setting as it is. Turning a queue ON delivers the
        messages that wait for it in transmission queues, in order (C3, P8).

        The activation settings are those of create_queue(); ``drop_activation=True`` is
        ACTIVATION (DROP) (and takes none of them). A queue without a procedure takes the
        others only together with ``activation_procedure``; given a procedure it had none,
        it gets create_queue()'s defaults for what is not given."""
        return self.instance.catalog_ddl.alter_queue(self, name, status, retention=retention,
                                                     poison_message_handling=poison_message_handling,
                                                     activation_procedure=activation_procedure,
                                                     activation_status=activation_status,
                                                     max_queue_readers=max_queue_readers,
                                                     execute_as=execute_as,
                                                     drop_activation=drop_activation)

    def drop_queue(self, name: str) -> None:
        """DROP QUEUE: refused while a service is bound to it; its messages go with it."""
        return self.instance.catalog_ddl.drop_queue(self, name)

    def queues(self) -> list[Queue]:
        return self.instance.catalog_ddl.queues(self)

    def create_service(
        self, name: str, queue: str, contracts: Iterable[str] | None = None
    ) -> Service:
        """CREATE SERVICE name ON QUEUE queue [(contract, ...)]. A service that lists no
        contracts can only initiate conversations; ``contracts=["DEFAULT"]`` accepts the
        default contract (as in SQL Server)."""
        return self.instance.catalog_ddl.create_service(self, name, queue, contracts)

    def alter_service(
        self,
        name: str,
        queue: str | None = None,
        *,
        add_contracts: Iterable[str] = (),
        drop_contracts: Iterable[str] = (),
    ) -> Service:
        """ALTER SERVICE name [ON QUEUE queue] [(ADD CONTRACT c, DROP CONTRACT c, ...)]."""
        return self.instance.catalog_ddl.alter_service(self, name, queue,
                                                       add_contracts=add_contracts,
                                                       drop_contracts=drop_contracts)

    def drop_service(self, name: str) -> None:
        """DROP SERVICE: its conversations end at once (their far sides in this instance
        get error -8490, C2), then the service goes."""
        return self.instance.catalog_ddl.drop_service(self, name)

    def services(self) -> list[Service]:
        return self.instance.catalog_ddl.services(self)

    # -- routes (R10; kernel/route_ddl.py) ------------------------------------------------

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
        return self.instance.route_ddl.create_route(self, name, service_name=service_name,
                                                    broker_instance=broker_instance,
                                                    address=address,
                                                    mirror_address=mirror_address,
                                                    lifetime=lifetime)

    def alter_route(self, name: str, **changes: Any) -> Route:
        """ALTER ROUTE: changes only the clauses given. '' removes SERVICE_NAME,
        BROKER_INSTANCE or MIRROR_ADDRESS, as in SQL Server; the result must obey R10.2."""
        return self.instance.route_ddl.alter_route(self, name, **changes)

    def drop_route(self, name: str) -> None:
        """DROP ROUTE; dropping a route in use is allowed (R10.5)."""
        return self.instance.route_ddl.drop_route(self, name)

    def routes(self) -> list[Route]:
        return self.instance.route_ddl.routes(self)

    def route(self, name: str) -> Route:
        return self.instance.route_ddl.route(self, name)

    # -- mirroring (R9; kernel/mirroring.py) ---------------------------------------------

    @property
    def mirroring_role(self) -> str | None:
        """'PRINCIPAL', 'MIRROR', or None when the database is not part of a mirrored pair."""
        return self.instance.mirroring.mirroring_role(self)

    @property
    def mirroring_partner(self) -> str | None:
        """The partner's address (tcp://host:port), or None when not mirrored."""
        return self.instance.mirroring.mirroring_partner(self)

    def set_mirroring(self, role: str | None, partner: str | None = None) -> None:
        """Make this database a partner of a mirrored pair (R9): ``role`` 'PRINCIPAL' or
        'MIRROR', ``partner`` the other's broker endpoint (tcp://host:port). ``role`` None
        takes it out of the pair (SET PARTNER OFF). A MIRROR database takes no message from
        the network: its senders turn to its partner (R9.3)."""
        return self.instance.mirroring.set_mirroring(self, role, partner)

    def fail_over(self) -> str:
        """SET PARTNER FAILOVER: this side's role flips (PRINCIPAL <-> MIRROR); returns the
        new role. Run it on both partners (see the module's note)."""
        return self.instance.mirroring.fail_over(self)

    def execute(self, tsql: str) -> BatchResults:
        """Run a T-SQL script; returns the result sets of its RECEIVEs and SELECTs, in order
        (an empty list when it has none), with the lines its PRINT statements wrote on
        ``messages``. pybroker/docs/tsql.md lists what a script runs: the DDL of routes,
        message types, contracts, queues and services (on master also endpoints,
        certificates and ALTER DATABASE ... SET PARTNER), the conversation verbs, control
        flow, TRY ... CATCH, stored procedures and EXEC.

        A batch of DDL only is all or nothing; otherwise each statement outside BEGIN
        TRANSACTION commits on its own, and a failed statement stops the batch, rolling back
        an open transaction (pybroker.core.tsql.script; the error carries the result sets
        returned before it as ``results``). A line holding only GO (or GO count) ends a
        batch, as in sqlcmd and SSMS: the batches run in order, each with its own variables.

        The whole script is parsed first: a statement that is not understood runs nothing.
        """
        if not isinstance(tsql, str):
            raise BrokerError(f"execute() takes T-SQL text, not {type(tsql).__name__}")
        batches = conversation_parser.parse_batches(
            tsql, master=self.database_id == MASTER_DATABASE_ID)
        return run_batches(self, batches, self.script_databases())  # USE switches

    def script_databases(self) -> InstanceDatabases:
        """The instance's databases as a script sees them (USE, DB_ID(), DROP DATABASE)."""
        return InstanceDatabases(self.instance)

    # -- stored procedures (kernel/procedures.py; CREATE PROCEDURE and EXEC in execute()) --

    def procedures(self) -> list[Procedure]:
        """The stored procedures of this database, with their text (sys.procedures)."""
        return self.instance.procedures.list(self)

    def save_procedure(self, schema: str, name: str, definition: str, mode: str) -> None:
        """Keep CREATE (``mode``: or ALTER, CREATE OR ALTER) PROCEDURE text execute() parsed."""
        self.instance.procedures.save(self, schema, name, definition, mode)

    def drop_procedure(self, schema: str, name: str, *, if_exists: bool = False) -> None:
        self.instance.procedures.drop(self, schema, name, if_exists=if_exists)

    def procedure_definition(self, schema: str | None, name: str) -> tuple[str, str, str] | None:
        return self.instance.procedures.definition(self, schema, name)

    def ordinary_sql(self) -> DatabaseSql:
        """What a T-SQL batch's SELECT, INSERT, ... run on (kernel/user_sql.py)."""
        return self.instance.user_sql.of(self)

    def run_broker_priority(self, statement: PriorityStatement) -> None:
        """CREATE/ALTER/DROP BROKER PRIORITY (pybroker.kernel.broker_priorities)."""
        BrokerPriorities(self.kernel).run(self, statement)

    def run_statements(self, statements: Iterable[object]) -> None:
        """Run parsed statements (pybroker.core.tsql) in one transaction: any error, nothing
        changed (an endpoint a failed batch closed is started again)."""
        statements = list(statements)
        server = ServerBatch(self, statements)  # ENDPOINT and CERTIFICATE, on master only
        runner = StatementRunner(self, server=server.run, database_named=self.instance.database)
        with server, self.kernel.write(NOTHING):  # each statement says what it changes
            for statement in statements:
                runner.run(statement)
            server.finish()


def _did_you_mean(name: str, names: Iterable[str]) -> str:
    """A hint naming the existing name nearest to ``name``: one that differs only in case
    first (names are used as they were created), else one a slip away."""
    names = [n for n in names if n != name]
    for candidate in names:
        if candidate.lower() == name.lower():
            return f"; did you mean {candidate!r}? (names are used as they were created)"
    near = difflib.get_close_matches(name, names, n=1, cutoff=0.75)
    return f"; did you mean {near[0]!r}?" if near else ""
