"""The driver of activation's queue monitors (C3): it feeds each activated queue's monitor
(monitor.py) with arrivals, receives, returns and periodic checks, starts the readers the
monitors ask for, and writes what they show to the tables behind
``sys.dm_broker_queue_monitors`` and ``sys.dm_broker_activated_tasks``.

Readers are threads, each calling the queue's callable with the queue's ``Database``, or
running its stored procedure (C8) on it through pybroker.core.tsql.script, as
``Database.execute("EXEC proc")`` would:

- the callable receives the in-process ``Database`` (its transactions, RECEIVE and SEND),
  which only a thread of this process can use; a separate process could not open the
  instance file at all (DuckDB lets one process write it) and would need a client server;
- each reader's transactions are its own (the engine's unit of work is per thread), so
  readers of one queue work side by side on different conversation groups (C7), and a
  reader's processing inside its transaction holds only its groups; what they change is
  written through the one connection in turn (kernel/messaging/engine.py);
- a reader that raises is isolated by catching: its transaction has rolled back already
  (``Database.transaction()`` does that on the way out), the error is recorded as a broker
  event (``Broker:Activation``, subclass ``Aborted``, with the last line of its traceback)
  and the monitor counts the reader as returned. Five rolled-back RECEIVEs in a row turn
  the queue OFF (poison-message handling, C3), which stops its activation.

Stopping (``Instance.close()``) waits ``close_timeout`` seconds in all for running readers
to return, then abandons them: they are daemon threads, so they never keep the process
alive, and whatever they do afterwards fails on the closed instance. A reader that never
returns while holding an open transaction holds its groups (and, once it has changed
something, the instance's write transaction) as any transaction does.

The two views show the monitors and tasks as they are when read: pybroker/kernel/live_views.py
writes ``rows()`` to their tables right before a query that names them (the module says
why tables, written then). Events of activation (a reader that raised) are written at the
next round of the driver.
"""

from __future__ import annotations

import itertools
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pybroker.core.activation.monitor import DEFAULT_INTERVAL, QueueMonitor
from pybroker.core.activation.procedure import (
    ProcedureImportError,
    import_procedure,
    is_python_callable,
)
from pybroker.core.tsql.procedure_calls import split_name
from pybroker.core.tsql.script import run_procedure
from pybroker.errors import InstanceClosedError
from pybroker.timestamps import to_utc_datetime

if TYPE_CHECKING:  # pragma: no cover
    from pybroker.kernel.messaging.engine import Messaging
    from pybroker.storage.store import Store

DEFAULT_CLOSE_TIMEOUT = 5.0  # seconds stop() waits for running readers
POLL = 1.0  # seconds: the longest the driver sleeps
EVENT_CLASS = "Broker:Activation"  # SQL Server's trace event for activation

Key = tuple[int, str]  # (database_id, queue name)


@dataclass(frozen=True, slots=True)
class _Activated:
    """An activated queue's settings (select_activated_queues.sql)."""

    procedure: str
    max_readers: int
    execute_as: str


@dataclass(slots=True)
class _Task:
    """A running reader (a row of sys.dm_broker_activated_tasks)."""

    spid: int
    key: Key
    procedure: str
    execute_as: str
    start_time: datetime
    thread: threading.Thread | None = None


class ActivationRunner:
    """Runs activation for one instance: a driver thread and the reader threads.

    ``database_for(database_id)`` gives the ``Database`` a reader's callable is called
    with. ``check_interval`` is the monitors' periodic check (SQL Server checks every few
    seconds): the queues are looked at that often, and a reader is added at most that
    often per queue."""

    def __init__(
        self,
        store: Store,
        messaging: Messaging,
        clock: Callable[[], float],
        database_for: Callable[[int], Any],
        *,
        check_interval: float = DEFAULT_INTERVAL,
        close_timeout: float = DEFAULT_CLOSE_TIMEOUT,
    ) -> None:
        self._store = store
        self._messaging = messaging
        self._clock = clock
        self._database_for = database_for
        self._interval = check_interval
        self._close_timeout = close_timeout
        self._lock = threading.Lock()  # the monitors, the tasks and the arrivals
        self._monitors: dict[Key, QueueMonitor] = {}
        self._tasks: dict[int, _Task] = {}
        self._arrived: set[Key] = set()
        self._queues: dict[Key, _Activated] = {}
        self._catalog_version: int | None = None
        self._next_check = 0.0
        self._spids = itertools.count(1)
        self._import_failures: dict[Key, str] = {}
        self._events = False  # events recorded and not yet written
        # readers started, and readers that failed (raised, or whose procedure does not
        # resolve), since the instance opened (/metrics)
        self.readers_started = 0
        self.readers_failed = 0
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pybroker-activation",
                                        daemon=True)
        self.last_error: BaseException | None = None

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        self._messaging.queue_watcher = self
        self._thread.start()

    def stop(self) -> int:
        """Stop starting readers, wait up to ``close_timeout`` seconds for the running ones,
        write the events left. Returns how many readers were abandoned still running."""
        self._stopping.set()
        self._wake.set()
        deadline = time.monotonic() + self._close_timeout
        if threading.current_thread() is not self._thread:
            self._thread.join(self._close_timeout)
        with self._lock:
            running = [t.thread for t in self._tasks.values() if t.thread is not None]
        current = threading.current_thread()
        for thread in running:
            if thread is not current:
                thread.join(max(0.0, deadline - time.monotonic()))
        abandoned = sum(thread.is_alive() for thread in running)
        self._messaging.queue_watcher = None
        lock = self._store.lock
        if lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            try:
                self._write_events()
            except Exception as exc:  # closing goes on
                self.last_error = exc
            finally:
                lock.release()
        return abandoned

    @staticmethod
    def clear(store: Store) -> None:
        """Empty the tables a process that ended without stopping left behind (at open,
        before any thread runs; kernel/live_views.py writes them afterwards)."""
        with store.transaction():
            store.run("activation/delete_queue_monitors.sql")
            store.run("activation/delete_activated_tasks.sql")

    # -- what the engine tells (any thread; QueueWatcher of kernel/messaging/engine.py) -------

    def enqueued(self, queues: set[Key]) -> None:
        stale = self._messaging.catalog_version != self._catalog_version
        with self._lock:
            # A queue whose ACTIVATION the driver has not loaded yet (ALTER QUEUE, then a
            # SEND right after it) is woken too: the round loads it first.
            wanted = [k for k in queues if (stale or k in self._queues) and (
                k not in self._monitors or self._monitors[k].readers == 0)]
            if not wanted:
                return  # not activated, or readers run: the periodic check adds more
            self._arrived.update(wanted)
        self._wake.set()

    def received(self, queue: Key, messages: int) -> None:
        with self._lock:
            monitor = self._monitors.get(queue)
            if monitor is not None:
                monitor.receive_happened(self._clock(), messages)

    def waiting(self, queue: Key, change: int) -> None:
        with self._lock:
            monitor = self._monitors.get(queue)
            if monitor is not None:
                monitor.tasks_waiting = max(0, monitor.tasks_waiting + change)

    # -- the driver ----------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                self._round()
            except Exception as exc:  # never let the loop die; the next round retries
                self.last_error = exc
            wait = min(POLL, max(0.001, self._next_check - self._clock()))
            self._wake.wait(wait)
            self._wake.clear()

    def _round(self) -> None:
        version = self._messaging.catalog_version
        if version != self._catalog_version:
            self._load_queues()
            self._catalog_version = version
        now = self._clock()
        with_messages: set[Key] | None = None
        if now >= self._next_check:
            with self._store.lock:
                rows = self._store.run("activation/select_queues_with_messages.sql")
            with_messages = {(r[0], r[1]) for r in rows}
            self._next_check = now + self._interval
        starts: list[_Task] = []
        with self._lock:
            arrived, self._arrived = self._arrived, set()
            for key, queue in self._queues.items():
                monitor = self._monitors.get(key)
                if monitor is None:
                    monitor = self._monitors[key] = QueueMonitor(queue.max_readers,
                                                                 self._interval)
                elif monitor.max_readers != queue.max_readers:
                    monitor.limit(queue.max_readers)
                count = monitor.messages_arrived(now) if key in arrived else 0
                if with_messages is not None:
                    count += monitor.tick(now, key in with_messages)
                for _ in range(count):
                    task = _Task(next(self._spids), key, queue.procedure, queue.execute_as,
                                 to_utc_datetime(now))
                    self._tasks[task.spid] = task
                    starts.append(task)
            for key in [k for k, m in self._monitors.items()
                        if k not in self._queues and m.readers == 0]:
                del self._monitors[key]  # no longer activated, and no reader left
            events, self._events = self._events, False
        for task in starts:
            task.thread = threading.Thread(
                target=self._read, args=(task,), daemon=True,
                name=f"pybroker-reader-{task.spid}-{task.key[1]}")
            task.thread.start()
        if events:
            with self._store.lock:
                self._write_events()

    def _load_queues(self) -> None:
        with self._store.lock:
            rows = self._store.run("activation/select_activated_queues.sql")
        queues = {(r[0], r[1]): _Activated(r[2], r[3] or 0, r[4] or "SELF") for r in rows}
        with self._lock:
            self._queues = queues

    def rows(self) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        """The rows of sys.dm_broker_queue_monitors and sys.dm_broker_activated_tasks as
        the monitors and readers are now (kernel/live_views.py writes them when they are read)."""
        def when(t: float | None) -> datetime | None:
            return None if t is None else to_utc_datetime(t)

        with self._lock:
            monitors = tuple(
                (key[0], key[1], m.state, when(m.last_empty_rowset_time),
                 when(m.last_activated_time), m.tasks_waiting)
                for key, m in sorted(self._monitors.items()))
            tasks = tuple((t.spid, t.key[0], t.key[1], t.procedure, t.execute_as,
                           t.start_time)
                          for t in sorted(self._tasks.values(), key=lambda t: t.spid))
        return monitors, tasks

    def _write_events(self) -> None:
        with self._messaging.unit_of_work() as uow:
            uow.activate()
            self._messaging.remote.flush_events(uow)

    # -- a reader ------------------------------------------------------------------------

    def _read(self, task: _Task) -> None:
        key = task.key
        with self._lock:
            monitor = self._monitors.get(key)
            if monitor is not None:
                monitor.reader_started(self._clock())
            self.readers_started += 1
        try:
            database = self._database_for(key[0])
            handler = _resolve(task.procedure, database)
            with self._lock:
                self._import_failures.pop(key, None)
            tracing = self._messaging.tracing
            if tracing is None:
                handler(database)
            else:  # the reader's run is the "process" span its RECEIVEs link to
                with tracing.process(key[0], key[1]):
                    handler(database)
        except ProcedureImportError as exc:
            with self._lock:  # once per cause, not at every check
                known = self._import_failures.get(key) == str(exc)
                self._import_failures[key] = str(exc)
                self.readers_failed += 1
            if not known:
                self._event("Aborted", f"queue {self._queue_name(key)}: {exc}")
        except InstanceClosedError:
            pass  # Instance.close() ended its work: nothing to record, nor a file to hold it
        except BaseException as exc:  # a raising reader is isolated: recorded, not spread
            with self._lock:
                self.readers_failed += 1
            self._event("Aborted", f"the activation procedure {task.procedure} of queue "
                        f"{self._queue_name(key)} raised {_last_line(exc)}; its open "
                        "transaction rolled back")
        finally:
            with self._lock:
                self._tasks.pop(task.spid, None)
                monitor = self._monitors.get(key)
                if monitor is not None:
                    monitor.reader_returned(self._clock())
            self._wake.set()

    def _event(self, subclass: str, description: str) -> None:
        self._messaging.remote.event(EVENT_CLASS, subclass, None, None, None, description)
        with self._lock:
            self._events = True

    def _queue_name(self, key: Key) -> str:
        try:
            database = self._messaging.catalog(key[0]).name
        except Exception:  # the database went meanwhile: its id says enough
            database = f"(database {key[0]})"
        return f"{database}.{key[1]}"


def _resolve(procedure: str, database: Any) -> Callable[[Any], Any]:
    """The callable a reader calls with the queue's Database: the Python callable imported,
    or the stored procedure looked up now (SQL Server resolves the name at activation
    time): one that does not exist yet, or lives in another database, fails as an import
    does, recorded once until it exists."""
    if is_python_callable(procedure):
        return import_procedure(procedure)
    database_name, schema, name = split_name(procedure)
    if database_name is not None and database_name.lower() != database.name.lower():
        raise ProcedureImportError(
            f"the activation procedure {procedure} is in database {database_name}, not in the "
            f"queue's database {database.name}: an activation procedure runs in its queue's "
            "database")
    if database.procedure_definition(schema, name) is None:
        raise ProcedureImportError(
            f"the activation procedure {procedure} does not exist in database "
            f"{database.name}: CREATE PROCEDURE it (activation starts it once it exists)")
    return lambda db: run_procedure(db, schema, name)


def _last_line(exc: BaseException) -> str:
    """What a traceback's last lines say: the exception, and where it was raised."""
    line = traceback.format_exception_only(type(exc), exc)[-1].strip()
    frames = traceback.extract_tb(exc.__traceback__)
    if frames:
        last = frames[-1]
        line += f" (at {last.filename}, line {last.lineno}, in {last.name})"
    return line
