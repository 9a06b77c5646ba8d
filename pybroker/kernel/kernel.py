"""The kernel of one instance: what every front (Instance, Database, Conversation), the
broker endpoint, activation and the client server share, under public names.

It owns the store (the instance file), the clock, the routing engine, the messaging engine,
the background worker, the slots of the running broker endpoint and of activation, and the
write transactions it hands out (``write()``): each is an object of its own, so that the
kernel holds no transaction, only how deeply this instance's writes are nested now.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, NamedTuple, Protocol

import duckdb

from pybroker import arguments
from pybroker.core.routing.cache import EVERYTHING, CatalogChange
from pybroker.core.routing.decision import RouteDecision
from pybroker.core.routing.definition import MAX_VALUE_LENGTH, check_name, normalize_guid
from pybroker.core.routing.engine import RoutingEngine, to_utc_datetime
from pybroker.core.wire.transport_settings import Settings, WireCounts
from pybroker.errors import BrokerError, InstanceClosedError, NotFoundError
from pybroker.kernel.activation import ActivationRunner
from pybroker.kernel.live_views import LiveRows, LiveViews
from pybroker.kernel.messaging.endpoint_cache import DEFAULT_ENDPOINT_CACHE
from pybroker.kernel.messaging.engine import Messaging
from pybroker.kernel.worker import Worker
from pybroker.storage.duckdb_errors import translate_error
from pybroker.storage.store import Store


class RunningEndpoint(Protocol):
    """What the kernel asks of the running broker endpoint it holds
    (pybroker.kernel.broker_endpoint.runtime.BrokerEndpoint, which takes the kernel)."""

    started: datetime

    @property
    def port(self) -> int: ...

    @property
    def address(self) -> str: ...

    @property
    def settings(self) -> Settings: ...

    @property
    def is_closed(self) -> bool: ...

    @property
    def encryption(self) -> bool: ...

    def connections(self) -> list[tuple[Any, ...]]: ...

    def forwarded(self) -> list[tuple[Any, ...]]: ...

    def wire_counts(self) -> WireCounts | None: ...

    def mirrored_routes(self) -> list[tuple[Any, ...]]: ...

    def close(self) -> None: ...


class DatabaseRef(Protocol):
    """The database a service's method acts on: its id and its name (for messages)."""

    @property
    def database_id(self) -> int: ...

    @property
    def name(self) -> str: ...


class DatabaseKey(NamedTuple):
    """A database of the instance as the catalog lists it."""

    database_id: int
    name: str
    broker_instance: str


class Kernel:
    """One instance's store, clock, routing, messaging, write transactions and broker
    endpoint slot. ``clock`` returns epoch seconds; ``disable_queue(database_id, queue)``
    is how C3's poison message handling turns a queue OFF through the catalog."""

    def __init__(
        self,
        path: str | Path | None,
        *,
        clock: Callable[[], float],
        disable_queue: Callable[[int, str], None],
        retry_scale: float = 1.0,
        worker: bool = True,
        endpoint_cache: int = DEFAULT_ENDPOINT_CACHE,
        read_only: bool = False,
        memory_limit: str | None = None,
        threads: int | None = None,
    ) -> None:
        self.clock = clock
        # @@SPID of a T-SQL session: 51 up, as SQL Server numbers user sessions
        self.session_ids = itertools.count(51)
        self.store = Store(path, read_only=read_only, memory_limit=memory_limit,
                           threads=threads)
        self.routing = RoutingEngine(self.store, clock)
        self.closed = False
        # how deeply this instance's write transactions are nested now (the outermost
        # decides routing again when it commits)
        self.write_depth = 0
        try:
            self.messaging = Messaging(self.store, clock, self.route, disable_queue,
                                       retry_scale=retry_scale, endpoint_cache=endpoint_cache,
                                       routing_changed=self.routing.changed)
        except BaseException:
            self.store.close()
            raise
        self.worker: Worker | None = None
        self.activation: ActivationRunner | None = None
        self.endpoint: RunningEndpoint | None = None
        # what the broker endpoints closed since the instance opened did on the network:
        # /metrics' wire counters add the running endpoint's to it
        self.closed_endpoints_counts: WireCounts | None = None
        # the running endpoint that is the one the file defines (CREATE ENDPOINT on master,
        # pybroker.kernel.broker_endpoint.ddl): ALTER and DROP ENDPOINT stop, move or keep it
        self.defined_endpoint: RunningEndpoint | None = None
        self.live = LiveViews(self.store, self.live_rows)
        if not read_only:
            try:  # what a process that ended without closing showed of its activation
                ActivationRunner.clear(self.store)
            except BaseException:
                self.store.close()
                raise
        if worker and not read_only:  # the worker writes (retries, timers, expiry)
            self.worker = Worker(self.messaging, clock)
            self.worker.start()

    # -- time ----------------------------------------------------------------------------

    def now(self) -> datetime:
        """The clock's time as a naive UTC datetime (the catalog's columns)."""
        return to_utc_datetime(self.clock())

    # -- lifecycle -----------------------------------------------------------------------

    def check_open(self) -> None:
        if self.closed:
            raise InstanceClosedError()

    def close(self, timeout: float) -> None:
        """Stop activation, the broker endpoint and the worker, end every waiting RECEIVE,
        and close the file once other threads' transactions end (``timeout`` seconds at
        most; see Instance.close)."""
        if self.closed:
            return
        self.closed = True
        deadline = time.monotonic() + timeout
        self.store.closing(deadline)
        self.messaging.begin_close()
        if self.activation is not None:
            self.stop_activation()
        if self.endpoint is not None:
            self.endpoint.close()
        if self.worker is not None:
            self.worker.stop()
        self.live.clear()  # what this process held is gone with it
        self.messaging.close(deadline)

    def stop_activation(self) -> int:
        """Stop activation; how many readers were abandoned still running (0: none ran)."""
        runner, self.activation = self.activation, None
        return 0 if runner is None else runner.stop()

    # -- writes --------------------------------------------------------------------------

    def write(self, change: CatalogChange = EVERYTHING) -> WriteTransaction:
        """One write transaction; ``change`` says which routing answers it can alter."""
        self.check_open()
        self.store.check_writable()
        return WriteTransaction(self, change)

    def run_pending_all(self) -> None:
        """Retry every waiting transmission now (a transport or route appeared)."""
        self.messaging.run_pending(retry_all=True)

    def write_events(self) -> None:
        """The broker events recorded and not yet written, written now if the instance's
        connection is free (a read never waits behind another thread's transaction, nor
        writes into this thread's own; then they come with the next unit of work)."""
        store = self.store
        if store.read_only or store.in_transaction or self.messaging.current() is not None:
            return
        # the write transaction first, then the store's lock, as every writer takes them;
        # a failure leaves the read to go on with what the file holds
        with contextlib.suppress(BrokerError):
            self.messaging.remote.write_events(wait=False)

    # -- what the catalog and routing answer ---------------------------------------------

    def databases(self) -> list[DatabaseKey]:
        return [DatabaseKey(*row) for row in self.store.run("instance/select_databases.sql")]

    def database(self, database_id: int) -> DatabaseKey:
        for key in self.databases():
            if key.database_id == database_id:
                return key
        raise NotFoundError(f"database id {database_id} does not exist in this instance")

    def route(
        self, service_name: str, *, broker_instance: str | None = None, origin: str
    ) -> RouteDecision:
        """Decide where a conversation goes (SPEC R1-R4); the arguments are checked when
        routing refuses them, to say which one is wrong."""
        try:
            return self.routing.route(origin, service_name, broker_instance)
        except (TypeError, NotFoundError):
            check_route_key(origin, service_name, broker_instance)
            raise

    def live_rows(self) -> LiveRows:
        """What the broker endpoint, activation and the open transactions' group locks
        hold now (kernel/live_views.py)."""
        endpoint, activation = self.endpoint, self.activation
        monitors, tasks = ((), ()) if activation is None else activation.rows()
        locks, waits = self.messaging.group_locks.live_rows()
        if endpoint is None or endpoint.is_closed:
            return LiveRows(monitors=monitors, tasks=tasks, group_locks=locks,
                            lock_waits=waits)
        return LiveRows((endpoint.address, endpoint.encryption, endpoint.started),
                        endpoint.connections(), endpoint.forwarded(),
                        endpoint.mirrored_routes(), monitors, tasks, locks, waits)


class WriteTransaction:
    """One catalog write: a single transaction. The routing answers the change can alter
    are voided (a rollback voids them all, see RoutingEngine), and so is the conversations'
    catalog cache. When the outermost write commits, the voided routing keys that were in
    use are decided again, and every waiting transmission is retried at once: creating the
    missing service, adding the missing route or turning a queue ON delivers what waits
    (C3, C5, R2.7), without waiting for the back-off."""

    def __init__(self, kernel: Kernel, change: CatalogChange) -> None:
        self.kernel = kernel
        self.change = change
        self._tx = kernel.store.transaction()

    def __enter__(self) -> None:
        uow = self.kernel.messaging.current()
        if uow is not None:  # inside Database.transaction(): the write joins it
            uow.ensure_tx()
            uow.catalog_written = True
        self._tx.__enter__()
        self.kernel.write_depth += 1

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        kernel = self.kernel
        messaging = kernel.messaging
        # counted while the store's lock is still this thread's: once the transaction
        # ends, another thread's write may begin and count itself
        outermost = kernel.write_depth == 1
        kernel.write_depth -= 1
        try:
            if isinstance(exc, duckdb.Error):
                self._tx.__exit__(exc_type, exc, tb)
                store = kernel.store
                raise translate_error(exc, str(store.path or ":memory:"),
                                      read_only=store.read_only) from exc
            result = self._tx.__exit__(exc_type, exc, tb)
        except BaseException:
            messaging.forget_endpoints()  # a conversation change inside may be undone
            raise
        finally:
            kernel.routing.changed(self.change)
            messaging.catalog_changed()
        if exc is not None:
            messaging.forget_endpoints()
        elif outermost:
            if not kernel.store.in_transaction:
                kernel.routing.redecide()
            messaging.after_catalog_write()
        return result


def check_route_key(origin: object, service_name: object, broker_instance: object) -> None:
    """The arguments of a routing decision, checked (the routing engine assumes them)."""
    arguments.text("origin", origin, limit=MAX_VALUE_LENGTH)
    check_name("service", service_name, MAX_VALUE_LENGTH)
    if broker_instance is not None:
        normalize_guid(broker_instance)

