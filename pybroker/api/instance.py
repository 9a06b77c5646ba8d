"""The public API: an Instance (one DuckDB file) holding Databases, their queues, services
and routes, and the routing decisions made over them. Both are fronts over the instance's
kernel (pybroker.kernel) and the services composed on it; the rows a Database hands out
are in kernel/catalog_objects.py.
"""

from __future__ import annotations

import datetime as dt
import difflib
import re
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import Any

import duckdb

from pybroker import arguments
from pybroker.api.database import Database
from pybroker.api.database_script import InstanceDatabases
from pybroker.arguments import check_read_only_query
from pybroker.core.activation.monitor import DEFAULT_INTERVAL
from pybroker.core.routing.cache import NOTHING, CatalogChange
from pybroker.core.routing.decision import RouteDecision
from pybroker.core.routing.definition import check_name, normalize_guid
from pybroker.core.routing.engine import OUTSIDE, ExplainStep
from pybroker.core.tsql.batch_interface import BatchResults
from pybroker.errors import (
    AlreadyExistsError,
    BrokerError,
    InstanceClosedError,
    InvalidArgumentError,
    NotFoundError,
    StorageError,
)
from pybroker.kernel.activation import DEFAULT_CLOSE_TIMEOUT, ActivationRunner
from pybroker.kernel.broker_endpoint.runtime import BrokerEndpoint
from pybroker.kernel.broker_endpoints import BrokerEndpoints
from pybroker.kernel.catalog_ddl import CatalogDDL
from pybroker.kernel.kernel import Kernel, check_route_key
from pybroker.kernel.live_views import names_broker_events, names_live_view
from pybroker.kernel.messaging.endpoint_cache import DEFAULT_ENDPOINT_CACHE
from pybroker.kernel.mirroring import Mirroring
from pybroker.kernel.procedures import Procedures
from pybroker.kernel.route_ddl import RouteDDL
from pybroker.kernel.user_sql import UserSql
from pybroker.storage import no_pandas
from pybroker.storage.duckdb_errors import damage_reason, damaged_message, query_failed
from pybroker.storage.snapshot import write_snapshot

CLOSE_TIMEOUT = 5.0  # seconds Instance.close() waits for other threads' transactions

# DuckDB 1.5.6's quotation of the statement a failure is in: "\n\nLINE 1: ...\n   ^"
_QUOTED_QUERY = re.compile(r"\n\nLINE \d+: .*\n *\^\s*$", re.DOTALL)
# what DuckDB raises for a parameter it cannot bind (after its own duckdb.Error)
_BIND_ERRORS = (TypeError, ValueError, RuntimeError, UnicodeError)


def _unbound(exc: Exception) -> InvalidArgumentError:
    return InvalidArgumentError(f"params cannot be bound to the query: {type(exc).__name__}")


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

    def renew_certificate(self, not_after: dt.datetime | None = None) -> str:
        """Renew this instance's endpoint certificate before it expires: the same subject
        and key, valid from now to ``not_after`` (naive UTC; default ten years on). Returns
        the new PEM, which each peer then trusts in place of the old one
        (``peer.trust(name, pem)``, or ``pybroker trust``). Refused while the endpoint
        runs: close it (stop ``pybroker serve``), renew, start it again."""
        return self.broker_endpoints.renew_certificate(not_after)

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

    # -- tracing (pybroker/docs/otel.md) --------------------------------------------------

    def enable_tracing(self, tracer_provider: Any = None) -> None:
        """Make OpenTelemetry spans of this instance's messages from now: ``send``,
        ``receive``, ``process`` (activation) and ``forward``, each message carrying its
        trace context (a W3C traceparent) to the instances it goes to. ``tracer_provider``
        is an OpenTelemetry TracerProvider (default: the global one,
        ``opentelemetry.trace.get_tracer_provider()``). Needs the ``pybroker[otel]`` extra
        (opentelemetry-api and -sdk); ``connect(FILE, otel=True)`` calls this."""
        self.kernel.check_open()
        try:
            from pybroker.kernel.tracing import enable_tracing
        except ImportError as exc:
            raise BrokerError(
                f"tracing needs OpenTelemetry ({exc}): pip install 'pybroker[otel]'") from None
        enable_tracing(self.kernel.messaging, tracer_provider)

    @property
    def tracing(self) -> bool:
        """Whether this instance makes spans of its messages (``enable_tracing``)."""
        return self.kernel.messaging.tracing is not None

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
        cursor = self._query_cursor(query, params)
        try:
            return no_pandas.call(cursor.sql, query, params=params)
        except duckdb.Error as exc:
            raise self._query_error(exc, query) from exc
        except _BIND_ERRORS as exc:
            raise _unbound(exc) from exc

    def sql_rows(self, query: str, params: Any = None
                 ) -> tuple[list[str], list[str], list[tuple[Any, ...]]]:
        """What ``sql()`` gives, fetched at once: the column names, DuckDB's name of each
        column's type, and the rows. The query runs once (a relation plans it again when
        it is fetched), with the same checks and errors as ``sql()``, failures in fetching
        its rows included. The server answers a client's ``sql()`` with it."""
        cursor = self._query_cursor(query, params)
        try:
            no_pandas.call(cursor.execute, query, params)
            description = cursor.description or []
            rows = cursor.fetchall()
        except duckdb.Error as exc:
            # what sql() says of it: DuckDB's explanation without the query's text quoted
            # after it, which a statement adds and a relation does not
            said = _QUOTED_QUERY.sub("", str(exc))
            raise self._query_error(exc if said == str(exc) else type(exc)(said),
                                    query) from exc
        except _BIND_ERRORS as exc:
            raise _unbound(exc) from exc
        finally:
            cursor.close()
        return [d[0] for d in description], [str(d[1]) for d in description], rows

    def _query_cursor(self, query: str, params: Any) -> duckdb.DuckDBPyConnection:
        """A cursor of its own for a read-only query, once the query passed sql()'s
        checks and what it reads of the process is current."""
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
        return kernel.store.connection.cursor()

    def _query_error(self, exc: duckdb.Error, query: str) -> BrokerError:
        """What a query DuckDB refused or failed raises (sql(), sql_rows())."""
        if self.kernel.store.closed:  # closed by another thread meanwhile
            return InstanceClosedError()
        damage = damage_reason(exc)
        if damage is not None:
            return StorageError(damaged_message(str(self.path), damage))
        return InvalidArgumentError(query_failed(exc, query, self._sys_view_names))

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


def _did_you_mean(name: str, names: Iterable[str]) -> str:
    """A hint naming the existing name nearest to ``name``: one that differs only in case
    first (names are used as they were created), else one a slip away."""
    names = [n for n in names if n != name]
    for candidate in names:
        if candidate.lower() == name.lower():
            return f"; did you mean {candidate!r}? (names are used as they were created)"
    near = difflib.get_close_matches(name, names, n=1, cutoff=0.75)
    return f"; did you mean {near[0]!r}?" if near else ""
