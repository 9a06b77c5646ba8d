"""The public API: an Instance (one DuckDB file) holding Databases, their queues, services
and routes, and the routing decisions made over them.

The parts live beside it: catalog_objects.py (Route, Service, Queue, MessageType and
Contract, the rows a Database hands out), database_objects.py (message type, contract,
queue and service DDL, which Database takes from ObjectDDLMixin) and database_routes.py
(route DDL, from RouteDDLMixin). The names that moved out of this module are imported back
with ``import X as X``, so importing them from here still works.
"""

from __future__ import annotations

import contextlib
import difflib
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any

import duckdb

from pybroker import arguments, no_pandas
from pybroker.activation.monitor import DEFAULT_INTERVAL
from pybroker.activation.runner import DEFAULT_CLOSE_TIMEOUT, ActivationRunner
from pybroker.arguments import check_read_only_query
from pybroker.broker_endpoint.ddl import (
    MASTER_DATABASE_ID,
    SERVER_STATEMENTS,
    ServerBatch,
)
from pybroker.broker_endpoint.runtime import Endpoint
from pybroker.catalog_objects import Contract as Contract
from pybroker.catalog_objects import MessageType as MessageType
from pybroker.catalog_objects import Queue as Queue
from pybroker.catalog_objects import Route as Route
from pybroker.catalog_objects import Service as Service
from pybroker.conversation.api import Conversation, Message
from pybroker.conversation.endpoint_cache import DEFAULT_ENDPOINT_CACHE
from pybroker.conversation.engine import Messaging
from pybroker.conversation.worker import Worker
from pybroker.database_mirroring import MirroringMixin
from pybroker.database_objects import _SENT_BY as _SENT_BY
from pybroker.database_objects import ObjectDDLMixin
from pybroker.database_objects import _contract as _contract
from pybroker.database_objects import _contract_list as _contract_list
from pybroker.database_objects import _validation_code as _validation_code
from pybroker.database_routes import _ROUTE_CLAUSES as _ROUTE_CLAUSES
from pybroker.database_routes import RouteDDLMixin
from pybroker.errors import (
    AlreadyExistsError,
    BrokerError,
    InstanceClosedError,
    InvalidArgumentError,
    NotFoundError,
    StorageError,
)
from pybroker.instance_endpoint import EndpointMixin
from pybroker.live_views import LiveRows, LiveViews, names_broker_events, names_live_view
from pybroker.routing.cache import EVERYTHING, NOTHING, CatalogChange
from pybroker.routing.decision import RouteDecision
from pybroker.routing.definition import MAX_VALUE_LENGTH, check_name, normalize_guid
from pybroker.routing.engine import OUTSIDE, ExplainStep, RoutingEngine
from pybroker.server.snapshot import write_snapshot
from pybroker.storage import Store
from pybroker.storage_errors import (
    damage_reason,
    damaged_message,
    query_failed,
    translate_error,
)
from pybroker.timestamps import to_utc_datetime
from pybroker.tsql.script import ResultSet

CLOSE_TIMEOUT = 5.0  # seconds Instance.close() waits for other threads' transactions


class Instance(EndpointMixin):
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

        self._clock = clock or time.time
        self._store = Store(path, read_only=read_only, memory_limit=memory_limit,
                            threads=threads)
        self._routing = RoutingEngine(self._store, self._clock)
        self._closed = False
        self._write_depth = 0
        try:
            self._messaging = Messaging(self._store, self._clock, self.route,
                                        self._disable_queue, retry_scale=retry_scale,
                                        endpoint_cache=endpoint_cache,
                                        routing_changed=self._routing.changed)
        except BaseException:
            self._store.close()
            raise
        self._worker: Worker | None = None
        self._activation: ActivationRunner | None = None
        self._endpoint: Endpoint | None = None
        self._on_close: list[Callable[[], None]] = []
        # the running endpoint that is the one the file defines (CREATE ENDPOINT on master,
        # pybroker.broker_endpoint.ddl): ALTER and DROP ENDPOINT stop, move or keep it
        self._defined_endpoint: Endpoint | None = None
        self._live = LiveViews(self._store, self._live_rows)
        if not read_only:
            try:  # what a process that ended without closing showed of its activation
                ActivationRunner.clear(self._store)
            except BaseException:
                self._store.close()
                raise
        if worker and not read_only:  # the worker writes (retries, timers, expiry)
            self._worker = Worker(self._messaging, self._clock)
            self._worker.start()

    # -- lifecycle -----------------------------------------------------------------------

    @property
    def path(self) -> Path | None:
        return self._store.path

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
        self._messaging.remote.event_listener = callback

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
        if self._closed:
            return
        callbacks, self._on_close = self._on_close, []
        for callback in reversed(callbacks):  # a client server stops while the file is open
            callback()
        self._closed = True
        self._store.closing(time.monotonic() + timeout)
        self._messaging.begin_close()
        if self._activation is not None:
            self.stop_activation()
        if self._endpoint is not None:
            self._endpoint.close()
        if self._worker is not None:
            self._worker.stop()
        self._live.clear()  # what this process held is gone with it
        self._messaging.close()

    def _write_events(self) -> None:
        """The broker events recorded and not yet written, written now if the instance's
        connection is free (a read never waits behind another thread's transaction, nor
        writes into this thread's own; then they come with the next unit of work)."""
        store = self._store
        if store.read_only or store.in_transaction or not store._lock.acquire(True, 0.05):
            return
        try:
            self._messaging.remote.write_events()
        except BrokerError:
            pass  # the read goes on with what the file holds
        finally:
            store._lock.release()

    def _live_rows(self) -> LiveRows:
        """What the broker endpoint and activation hold now (live_views.py)."""
        endpoint, activation = self._endpoint, self._activation
        monitors, tasks = ((), ()) if activation is None else activation.rows()
        if endpoint is None or endpoint.is_closed:
            return LiveRows(monitors=monitors, tasks=tasks)
        return LiveRows((endpoint.address, endpoint.encryption, endpoint.started),
                        endpoint.connections(), endpoint.forwarded(),
                        endpoint.mirrored_routes(), monitors, tasks)

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
            raise InstanceClosedError()
        self._store.check_writable()
        return _Write(self, change)

    def _database_by_id(self, database_id: int) -> Database:
        for db in self.databases():
            if db.database_id == database_id:
                return db
        raise NotFoundError(f"database id {database_id} does not exist in this instance")

    def _disable_queue(self, database_id: int, queue: str) -> None:
        """C3: poison message handling turns the queue OFF, as ALTER QUEUE would (the
        messaging engine calls this; it is given the method, not the instance)."""
        self._database_by_id(database_id).alter_queue(queue, status=False)

    # -- activation (C3, pybroker.activation) ------------------------------------------

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
        pybroker.activation.runner). A reader that raises is recorded in
        sys.broker_events; sys.dm_broker_queue_monitors and sys.dm_broker_activated_tasks
        show the monitors and running readers."""
        if self._closed:
            raise InstanceClosedError()
        arguments.real_number("check_interval", check_interval, minimum=0.001, maximum=3600.0)
        arguments.real_number("close_timeout", close_timeout, minimum=0.0, maximum=3600.0)
        self._store.check_writable()
        if self._activation is not None:
            raise BrokerError("activation is already running in this instance; it runs "
                              "once per instance (stop_activation() first)")
        self._activation = ActivationRunner(
            self._store, self._messaging, self._clock, self._database_by_id,
            check_interval=check_interval, close_timeout=close_timeout)
        self._activation.start()

    def stop_activation(self) -> int:
        """Stop activation (started readers get its ``close_timeout`` to return). Returns
        how many readers were still running and are abandoned; 0 when none was running."""
        runner, self._activation = self._activation, None
        return 0 if runner is None else runner.stop()

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
            raise InstanceClosedError()
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
        InvalidArgumentError, as does a SELECT calling nextval(), setseed(), checkpoint() or
        another function that changes state (arguments.py lists them). Changes go
        through the API or T-SQL (``Database.execute()``), which keep routing and the
        messaging engine in step with the file. It runs on its own cursor, so it sees what
        is committed and never disturbs the background worker or a transaction in progress
        on the instance's connection. A query DuckDB cannot run raises InvalidArgumentError
        carrying DuckDB's own explanation (the query is DuckDB's SQL)."""
        if self._closed:
            raise InstanceClosedError()
        check_read_only_query(query)
        if params is not None and not isinstance(params, (list, tuple, dict)):
            raise InvalidArgumentError(
                f"params must be a list, a tuple or a dict, not {type(params).__name__}")
        if names_live_view(query):  # what the process holds, as of now (live_views.py)
            self._live.refresh()
        if names_broker_events(query):
            self._write_events()
        try:
            return no_pandas.call(self._store.connection.cursor().sql, query, params=params)
        except duckdb.Error as exc:
            if self._store.closed:  # closed by another thread meanwhile
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
        return [row[0] for row in self._store.query("instance/select_sys_view_names.sql")[1]]

    def snapshot(self, path: str | Path, *, overwrite: bool = False) -> Path:
        """Write a point-in-time copy of the instance to the new DuckDB file ``path``.

        The copy holds every table, ``sys.*`` view and macro as committed at one moment
        (one transaction reads them all), so DuckDB's own CLI opens it while this process
        still holds the instance file: ``duckdb -readonly OUT.duckdb``. It is as fresh as
        the moment it was taken and never changes after; take another to see later changes.
        An existing ``path`` is refused unless ``overwrite=True``. Returns the path written
        (pybroker.server.snapshot)."""
        if self._closed:
            raise BrokerError("the instance is closed")
        arguments.flag("overwrite", overwrite)
        self._live.refresh()
        return write_snapshot(self._store, path, overwrite=overwrite)


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
        # counted while the store's lock is still this thread's: once the transaction
        # ends, another thread's write may begin and count itself
        outermost = instance._write_depth == 1
        instance._write_depth -= 1
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
            instance._routing.changed(self._change)
            messaging.catalog_changed()
        if exc is not None:
            messaging.forget_endpoints()
        elif outermost:
            if not instance._store.in_transaction:
                instance._routing.redecide()
            messaging.after_catalog_write()
        return result


class Database(ObjectDDLMixin, RouteDDLMixin, MirroringMixin):
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
            self.database_id, from_service, to_service, contract, broker_instance, lifetime,
            related_conversation_group)
        return Conversation(self, handle)

    def conversation(self, handle: str) -> Conversation:
        """The conversation endpoint of this database with that handle (e.g. to reply on a
        received message's ``conversation_handle``)."""
        arguments.text("handle", handle, limit=64)
        ep = self._instance._messaging.endpoint(handle, self.database_id)
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
        return self._instance._messaging.receive(
            self.database_id, queue, max_messages, timeout, conversation_handle,
            conversation_group_id)

    def get_conversation_group(self, queue: str, *, timeout: float = 0.0) -> str | None:
        """GET CONVERSATION GROUP FROM queue: the conversation group the next RECEIVE takes,
        waiting up to ``timeout`` seconds for a message (WAITFOR); None when none is ready."""
        arguments.real_number("timeout", timeout, minimum=0.0, maximum=arguments.MAX_SECONDS)
        return self._instance._messaging.get_conversation_group(self.database_id, queue,
                                                                timeout)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Database]:
        """One transaction for every send, receive, begin_dialog and end inside: all commit
        together or roll back together (a rolled-back receive puts its messages back)."""
        with self._instance._messaging.unit_of_work():
            yield self

    def execute(self, tsql: str) -> list[ResultSet]:
        """Run a T-SQL batch; returns the result sets of its RECEIVEs and SELECTs, in order
        (an empty list when it has none).

        DDL: CREATE/ALTER/DROP ROUTE (R10), MESSAGE TYPE, CONTRACT, QUEUE and SERVICE (C2,
        C3); on master also CREATE/ALTER/DROP ENDPOINT and CREATE/DROP CERTIFICATE (P2,
        pybroker.tsql.endpoint_ddl) and ALTER DATABASE ... SET PARTNER (R9,
        pybroker.tsql.database_ddl). A batch of DDL only is all or nothing.

        Conversations, as a SQL Server script writes them: DECLARE, SET and SELECT of
        variables, BEGIN DIALOG, SEND, RECEIVE, WAITFOR (RECEIVE | GET CONVERSATION GROUP),
        GET CONVERSATION GROUP, END CONVERSATION, BEGIN CONVERSATION TIMER, MOVE
        CONVERSATION and BEGIN/COMMIT/ROLLBACK TRANSACTION (pybroker.tsql.script says how
        such a batch runs: each statement in its own transaction outside BEGIN TRANSACTION,
        and a failed statement stops the batch, rolling back an open transaction; the error
        then carries the result sets returned before it as ``results``).

        A line holding only GO (or GO count) ends a batch, as in sqlcmd and SSMS: the
        batches run in order, each on its own (its own variables and transactions).

        The whole script is parsed first: a statement that is not understood runs nothing.
        """
        from pybroker.tsql.conversation_parser import parse_batches
        from pybroker.tsql.script import run_batches

        if not isinstance(tsql, str):
            raise BrokerError(f"execute() takes T-SQL text, not {type(tsql).__name__}")
        batches = parse_batches(tsql, master=self.database_id == MASTER_DATABASE_ID)
        return run_batches(self, batches)

    def run_statements(self, statements: Iterable[object]) -> None:
        """Run parsed statements (pybroker.tsql) in one transaction: any error, nothing
        changed (an endpoint a failed batch closed is started again)."""
        from pybroker.database_mirroring import run_partner_statement
        from pybroker.tsql import AlterRoute, CreateRoute, DropRoute
        from pybroker.tsql import object_ddl as ddl
        from pybroker.tsql.database_ddl import AlterDatabasePartner

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
                        poison_message_handling=statement.poison_message_handling,
                        activation_procedure=statement.activation_procedure,
                        activation_status=statement.activation_status,
                        max_queue_readers=statement.max_queue_readers,
                        execute_as=statement.execute_as)
                elif isinstance(statement, ddl.AlterQueue):
                    self.alter_queue(
                        statement.name, statement.status, retention=statement.retention,
                        poison_message_handling=statement.poison_message_handling,
                        activation_procedure=statement.activation_procedure,
                        activation_status=statement.activation_status,
                        max_queue_readers=statement.max_queue_readers,
                        execute_as=statement.execute_as,
                        drop_activation=statement.drop_activation)
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
                elif isinstance(statement, AlterDatabasePartner):  # R9, on master
                    run_partner_statement(self._instance.database(statement.database),
                                          statement)
                else:
                    raise BrokerError(f"execute() cannot run {statement!r}")
            server.finish()


def _check_key(origin: object, service_name: object, broker_instance: object) -> None:
    """The arguments of a routing decision, checked (the routing engine assumes them)."""
    arguments.text("origin", origin, limit=MAX_VALUE_LENGTH)
    check_name("service", service_name, MAX_VALUE_LENGTH)
    if broker_instance is not None:
        normalize_guid(broker_instance)


def _did_you_mean(name: str, names: Iterable[str]) -> str:
    """A hint naming the existing name nearest to ``name``: one that differs only in case
    first (names are used as they were created), else one a slip away."""
    names = [n for n in names if n != name]
    for candidate in names:
        if candidate.lower() == name.lower():
            return f"; did you mean {candidate!r}? (names are used as they were created)"
    near = difflib.get_close_matches(name, names, n=1, cutoff=0.75)
    return f"; did you mean {near[0]!r}?" if near else ""
